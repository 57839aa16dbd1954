package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/locker-go/locker"
)

// openTimeout bounds connecting to a backend, so a dead address fails with
// its name instead of hanging.
const openTimeout = 15 * time.Second

// backend is an opened backend and how to name it in messages.
type backend struct {
	shown string // the URL, redacted
	addr  string // host:port(s), or the file of SQLite
	locker.Locker
}

// backendURL picks the backend: the flag, else $LOCKER_BACKEND, else the
// embedded SQLite default.
func (e env) backendURL(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	if v := e.getenv("LOCKER_BACKEND"); v != "" {
		return v, nil
	}
	return e.defaultBackend()
}

// defaultBackend is SQLite at $XDG_STATE_HOME/locker/locker.db (else
// ~/.local/state/locker/locker.db), its directory created private to the user.
func (e env) defaultBackend() (string, error) {
	dir := e.getenv("XDG_STATE_HOME")
	if !filepath.IsAbs(dir) { // the XDG spec says to ignore relative paths
		home := e.getenv("HOME")
		if home == "" {
			var err error
			if home, err = os.UserHomeDir(); err != nil {
				return "", fmt.Errorf("no --backend, $LOCKER_BACKEND, $XDG_STATE_HOME or $HOME: give a backend URL")
			}
		}
		dir = filepath.Join(home, ".local", "state")
	}
	dir = filepath.Join(dir, "locker")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("creating the state directory for the default SQLite backend: %w (or give --backend URL)", err)
	}
	return (&url.URL{Scheme: "sqlite", Path: filepath.Join(dir, "locker.db")}).String(), nil
}

// open connects to the backend at raw.
func (e env) open(ctx context.Context, raw string) (*backend, error) {
	rememberSecrets(raw)
	b := &backend{shown: redactURL(raw), addr: addressOf(raw)}
	octx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	var opts []locker.ClientOption
	if e.logger != nil {
		opts = append(opts, locker.WithLogger(e.logger))
	}
	l, err := locker.Open(octx, raw, opts...)
	if errors.Is(err, context.DeadlineExceeded) && octx.Err() != nil && ctx.Err() == nil {
		err = locker.Unavailable(fmt.Errorf("no answer within %v: %w", openTimeout, err))
	}
	if err != nil {
		if errors.Is(err, locker.ErrUnknownScheme) || errors.Is(err, locker.ErrInvalidURL) {
			return nil, err // already names the URL (redacted) and the known schemes
		}
		return nil, b.explain(err)
	}
	b.Locker = l
	return b, nil
}

// explain adds to a backend error which backend it was and, when it could
// not be reached, what to do.
func (b *backend) explain(err error) error {
	var ce codedError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ce):
		return err // complete already
	case errors.Is(err, locker.ErrUnavailable) && strings.HasPrefix(b.shown, "sqlite:"):
		return withCode(exitUnavailable, fmt.Errorf("backend %s is unavailable at %s: %w", b.shown, b.addr, err))
	case errors.Is(err, locker.ErrUnavailable):
		return withCode(exitUnavailable, fmt.Errorf("backend %s is unavailable at %s: %w\n"+
			"check that the server runs at that address and accepts these credentials "+
			"(this project's test servers start with: scripts/backends up)",
			b.shown, b.addr, err))
	default:
		return fmt.Errorf("backend %s: %w", b.shown, err)
	}
}

// addressOf names where a backend URL points: its host(s), or the file.
func addressOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	if u.Host != "" {
		return u.Host
	}
	if q := u.Query(); strings.EqualFold(u.Scheme, "migrate") && q.Has("from") {
		return addressOf(q.Get("from")) + " and " + addressOf(q.Get("to"))
	}
	if u.Opaque != "" {
		return u.Opaque
	}
	return u.Path
}

// shortName is a backend's label in bench tables and plots: the scheme and
// address, never credentials.
func shortName(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	addr := addressOf(raw)
	if strings.Count(addr, ",") > 0 {
		addr = fmt.Sprintf("%d nodes", strings.Count(addr, ",")+1)
	}
	return u.Scheme + " " + addr
}
