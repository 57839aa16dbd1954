package rediskey

import "testing"

func TestMatchPrefix(t *testing.T) {
	for in, want := range map[string]string{
		"locker:":   "locker:*",
		"a*":        `a\**`,
		"[a]?":      `\[a\]\?*`,
		`a\b-c^`:    `a\\b\-c\^*`,
		"ключ/a.b%": "ключ/a.b%*",
	} {
		if got := MatchPrefix(in); got != want {
			t.Errorf("MatchPrefix(%q) = %q, want %q", in, got, want)
		}
	}
}
