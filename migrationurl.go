package locker

import (
	"context"
	"fmt"
	"net/url"
	"strings"
)

// The "migrate" scheme opens a Migration by configuration alone:
// migrate:?from=URL&to=URL, each URL query-escaped, so that a service
// moves through the phases by changing its backend URL.
func init() { Register("migrate", openMigration) }

func openMigration(ctx context.Context, u *url.URL) (Locker, error) {
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil || u.Host != "" || u.User != nil || strings.Trim(u.Path+u.Opaque, "/") != "" {
		return nil, fmt.Errorf("%w: want migrate:?from=URL&to=URL, each URL query-escaped", ErrInvalidURL)
	}
	for k, v := range q {
		if (k != "from" && k != "to") || len(v) != 1 || v[0] == "" {
			return nil, fmt.Errorf("%w: migrate: parameter %q: want one from=URL and one to=URL, nothing else", ErrInvalidURL, k)
		}
	}
	if q.Get("from") == "" || q.Get("to") == "" {
		return nil, fmt.Errorf("%w: migrate: want both from=URL and to=URL", ErrInvalidURL)
	}
	from, err := Open(ctx, q.Get("from"))
	if err != nil {
		return nil, fmt.Errorf("migrate: from: %w", err)
	}
	to, err := Open(ctx, q.Get("to"))
	if err != nil {
		_ = from.Close()
		return nil, fmt.Errorf("migrate: to: %w", err)
	}
	return Migration(from, to), nil
}
