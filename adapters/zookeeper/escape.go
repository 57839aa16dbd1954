package zookeeper

import (
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"
)

// escape turns a key into one node name: it percent-encodes, per UTF-8
// byte, '/', '%', a leading '.' (no "." or "..") and the runes ZooKeeper
// refuses: controls, U+D800–U+F8FF, U+FFF0–U+FFFF and runes above U+FFFF
// (stored as surrogates in Java). Rune by rune, so escape is injective
// and keeps prefixes, which List relies on.
func escape(key string) string {
	var b strings.Builder
	for i, r := range key {
		if !needsEscape(r) && (i > 0 || r != '.') {
			b.WriteRune(r)
			continue
		}
		var buf [utf8.UTFMax]byte
		for _, c := range buf[:utf8.EncodeRune(buf[:], r)] {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// unescape reverses escape, for names read back from the server.
func unescape(name string) (string, error) { return url.PathUnescape(name) }

func needsEscape(r rune) bool {
	switch {
	case r == '/', r == '%':
		return true
	case r <= 0x1f, r >= 0x7f && r <= 0x9f:
		return true
	case r >= 0xd800 && r <= 0xf8ff, r >= 0xfff0:
		return true
	}
	return false
}
