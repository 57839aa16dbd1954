// Package urlx is what adapters and the CLI share about URLs: host lists
// checked alike for every scheme (Hosts), errors that match
// locker.ErrInvalidURL (Invalid), and credentials kept out of messages —
// every URL shown goes through Redact, every error message that a client
// library may have built from a URL or DSN goes through Scrub.
package urlx

import (
	"net/url"
	"slices"
	"strings"
)

// Mask replaces a secret.
const Mask = "xxxxx"

// params are query parameters that carry credentials.
var params = []string{"password", "pass", "passwd", "pwd", "secret", "token", "sslpassword", "auth"}

// IsParam reports whether the query parameter name carries a credential.
func IsParam(name string) bool { return slices.Contains(params, strings.ToLower(name)) }

// Redact returns u for messages: the password of its user info and of
// every credential parameter masked. An opaque URL (scheme:user:pw@host)
// is not shown at all, since url.URL.Redacted leaves it as it is.
func Redact(u *url.URL) string {
	if u.Opaque != "" {
		return u.Scheme + ":(opaque)"
	}
	c := *u
	if _, ok := c.User.Password(); ok {
		c.User = url.UserPassword(c.User.Username(), Mask)
	}
	if c.RawQuery != "" {
		q, err := url.ParseQuery(c.RawQuery)
		switch {
		case err != nil:
			c.RawQuery = "…"
		case slices.ContainsFunc(keys(q), IsParam) || nests(u):
			for k, vs := range q {
				switch {
				case IsParam(k):
					q.Set(k, Mask)
				case nests(u) && len(vs) == 1:
					q.Set(k, redactNested(vs[0]))
				}
			}
			c.RawQuery = q.Encode()
		}
	}
	return c.String()
}

// Secrets lists u's credentials as they may appear in a message: as given,
// query-escaped and path-escaped.
func Secrets(u *url.URL) []string {
	var raw []string
	if p, ok := u.User.Password(); ok && p != "" {
		raw = append(raw, p)
	}
	var inner []string // the nested URLs' secrets, in every form
	if q, err := url.ParseQuery(u.RawQuery); err == nil {
		for k, vs := range q {
			switch {
			case IsParam(k):
				raw = append(raw, slices.DeleteFunc(vs, func(v string) bool { return v == "" })...)
			case nests(u):
				for _, v := range vs {
					if n, err := url.Parse(v); err == nil {
						inner = append(inner, Secrets(n)...)
					}
				}
			}
		}
	}
	var all []string
	for _, s := range raw {
		for _, f := range []string{s, url.QueryEscape(s), url.PathEscape(s)} {
			if !slices.Contains(all, f) {
				all = append(all, f)
			}
		}
	}
	for _, s := range inner { // and as they appear escaped in the outer URL
		for _, f := range []string{s, url.QueryEscape(s)} {
			if !slices.Contains(all, f) {
				all = append(all, f)
			}
		}
	}
	// Longest first, so a secret containing another is masked whole.
	slices.SortFunc(all, func(a, b string) int { return len(b) - len(a) })
	return all
}

// Scrub returns msg with u's credentials masked.
func Scrub(msg string, u *url.URL) string {
	for _, s := range Secrets(u) {
		msg = strings.ReplaceAll(msg, s, Mask)
	}
	return msg
}

func keys(q url.Values) []string {
	ks := make([]string, 0, len(q))
	for k := range q {
		ks = append(ks, k)
	}
	return ks
}

// nests reports whether u's query parameters are URLs of their own (a
// migrate: URL's from and to), whose credentials are u's too.
func nests(u *url.URL) bool { return strings.EqualFold(u.Scheme, "migrate") }

// redactNested is Redact of a URL given as a parameter's value.
func redactNested(v string) string {
	n, err := url.Parse(v)
	if err != nil {
		return "…"
	}
	return Redact(n)
}
