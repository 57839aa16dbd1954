package locker

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// ErrUnknownScheme is returned by Open for a URL whose scheme no adapter registered.
var ErrUnknownScheme = errors.New("locker: unknown URL scheme")

// ErrInvalidURL is returned by Open and adapters for a URL they cannot use.
var ErrInvalidURL = errors.New("locker: invalid URL")

// Opener makes a Locker from a parsed URL.
type Opener func(ctx context.Context, u *url.URL) (Locker, error)

var (
	registryMu sync.RWMutex
	registry   = map[string]Opener{}
)

// Register makes Open use open for URLs with the given scheme. Adapters call
// it from init, so importing an adapter for its side effect is enough:
//
//	import _ "github.com/locker-go/locker/adapters/redis"
//
// Register panics if scheme is empty, open is nil, or the scheme is taken.
func Register(scheme string, open func(ctx context.Context, u *url.URL) (Locker, error)) {
	scheme = strings.ToLower(scheme)
	registryMu.Lock()
	defer registryMu.Unlock()
	if scheme == "" || open == nil {
		panic("locker: Register with empty scheme or nil opener")
	}
	if _, dup := registry[scheme]; dup {
		panic("locker: Register called twice for scheme " + scheme)
	}
	registry[scheme] = open
}

// Schemes lists the registered URL schemes, sorted.
func Schemes() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	s := make([]string, 0, len(registry))
	for k := range registry {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}

// Open returns a Locker for the backend that rawURL names, chosen by its
// scheme among the registered adapters, configured by opts (WithLogger).
// Errors never show the URL's password.
func Open(ctx context.Context, rawURL string, opts ...ClientOption) (Locker, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot parse it: %s", ErrInvalidURL, urlProblem(err))
	}
	registryMu.RLock()
	open := registry[strings.ToLower(u.Scheme)]
	registryMu.RUnlock()
	if open == nil {
		known := Schemes()
		hint := "none registered: import an adapter package, e.g. _ \"github.com/locker-go/locker/adapters/redis\""
		if len(known) > 0 {
			hint = "known: " + strings.Join(known, ", ")
		}
		return nil, fmt.Errorf("%w %q in %s (%s)", ErrUnknownScheme, u.Scheme, u.Redacted(), hint)
	}
	ctx, o := withClientOptions(ctx, opts)
	l, err := open(ctx, u)
	if c, ok := l.(configurable); ok && err == nil {
		c.configure(o)
	}
	return l, err
}

// urlProblem names the part of a URL that url.Parse refused, without its
// text: url.Error repeats the input, which may hold a password (and a
// mistyped password can end up in what it calls the port).
func urlProblem(err error) string {
	msg := err.Error()
	if ue, ok := err.(*url.Error); ok {
		msg = ue.Err.Error()
	}
	for _, p := range []struct{ has, says string }{
		{"invalid port", "its port (after the host and ':') is not a number; a ':' or '/' in a password must be %-escaped"},
		{"invalid userinfo", "its user:password@ part has a character that must be %-escaped"},
		{"invalid URL escape", "a '%' is not followed by two hex digits (a literal '%' is %25)"},
		{"in host name", "its host has a character no host name has"},
		{"missing ']'", "its host opens an IPv6 address with '[' and does not close it"},
		{"missing protocol scheme", "it has no scheme, such as redis://"},
		{"first path segment", "it has no scheme, such as redis://, and a ':' in its first part"},
		{"control character", "it has a control character"},
	} {
		if strings.Contains(msg, p.has) {
			return p.says
		}
	}
	return "its syntax is not a URL's"
}
