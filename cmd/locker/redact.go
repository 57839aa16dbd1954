package main

import (
	"io"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/locker-go/locker/internal/urlx"
)

// Credentials must never reach the terminal, logs or bench reports. Every
// URL locker shows goes through redactURL, and every message it prints goes
// through scrub, which also masks the secrets of the URLs in use wherever a
// backend driver may have repeated them (a DSN, a connection string).

const mask = urlx.Mask

// minLiteralSecret is the shortest secret masked wherever it appears.
const minLiteralSecret = 8

var (
	secretsMu sync.Mutex
	secrets   []string
)

// rememberSecrets records the credentials in raw so that scrub masks them
// in any message, however a driver formatted them.
func rememberSecrets(raw string) {
	u, err := url.Parse(raw)
	if err != nil {
		return
	}
	secretsMu.Lock()
	defer secretsMu.Unlock()
	for _, s := range urlx.Secrets(u) {
		// A short secret ("locker") would mask ordinary words of every
		// message; those are left to the structural patterns of scrub.
		if len(s) >= minLiteralSecret && !slices.Contains(secrets, s) {
			secrets = append(secrets, s)
		}
	}
	// Longest first, so a secret containing another is masked whole.
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
}

// redactURL returns raw with its password and credential parameters masked.
// An unparsable URL is not shown at all.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return urlx.Redact(u)
}

var (
	// scheme://user:password@ anywhere in a message.
	userinfoRE = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://[^:@/\s]*):[^@/\s]*@`)
	// password=secret in key=value connection strings (libpq DSN style).
	kvSecretRE = regexp.MustCompile(`(?i)\b(password|passwd|pwd|secret|token|sslpassword)(\s*[=:]\s*)('[^']*'|"[^"]*"|[^\s&,;]+)`)
)

// scrub masks credentials in a message about to be printed.
func scrub(s string) string {
	secretsMu.Lock()
	for _, sec := range secrets {
		s = strings.ReplaceAll(s, sec, mask)
	}
	secretsMu.Unlock()
	s = userinfoRE.ReplaceAllString(s, "${1}:"+mask+"@")
	return kvSecretRE.ReplaceAllString(s, "${1}${2}"+mask)
}

// scrubWriter writes through to w with the remembered secrets masked: the
// logs of run -v may quote a driver's error.
type scrubWriter struct{ w io.Writer }

func (s scrubWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(s.w, scrub(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}
