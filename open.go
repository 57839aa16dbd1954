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
// scheme among the registered adapters. Errors never show the URL's password.
func Open(ctx context.Context, rawURL string) (Locker, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Error repeats the input, which may hold a password.
		return nil, fmt.Errorf("%w: cannot parse it", ErrInvalidURL)
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
	return open(ctx, u)
}
