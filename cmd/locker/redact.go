package main

import (
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Credentials must never reach the terminal, logs or bench reports. Every
// URL locker shows goes through redactURL, and every message it prints goes
// through scrub, which also masks the secrets of the URLs in use wherever a
// backend driver may have repeated them (a DSN, a connection string).

const mask = "xxxxx"

// minLiteralSecret is the shortest secret masked wherever it appears.
const minLiteralSecret = 8

var (
	secretsMu sync.Mutex
	secrets   []string
)

// sensitiveParams are query parameters that carry credentials.
var sensitiveParams = []string{"password", "pass", "passwd", "pwd", "secret", "token", "sslpassword", "auth"}

// rememberSecrets records the credentials in raw so that scrub masks them
// in any message, however a driver formatted them.
func rememberSecrets(raw string) {
	u, err := url.Parse(raw)
	if err != nil {
		return
	}
	var found []string
	if p, ok := u.User.Password(); ok && p != "" {
		found = append(found, p, url.QueryEscape(p), url.PathEscape(p))
	}
	for k, vs := range u.Query() {
		if isSensitive(k) {
			for _, v := range vs {
				if v != "" {
					found = append(found, v, url.QueryEscape(v))
				}
			}
		}
	}
	secretsMu.Lock()
	defer secretsMu.Unlock()
	for _, s := range found {
		// A short secret ("locker") would mask ordinary words of every
		// message; those are left to the structural patterns of scrub.
		if len(s) >= minLiteralSecret && !slices.Contains(secrets, s) {
			secrets = append(secrets, s)
		}
	}
	// Longest first, so a secret containing another is masked whole.
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
}

func isSensitive(param string) bool {
	return slices.Contains(sensitiveParams, strings.ToLower(param))
}

// redactURL returns raw with its password and credential parameters masked.
// An unparsable URL is not shown at all.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), mask)
	}
	if q := u.Query(); len(q) > 0 {
		changed := false
		for k := range q {
			if isSensitive(k) {
				q.Set(k, mask)
				changed = true
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
	}
	return u.String()
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
