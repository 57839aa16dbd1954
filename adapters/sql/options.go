package sql

import (
	"errors"
	"fmt"
	"regexp"
	"time"
)

// DefaultTable is the lock table's name unless WithTable says otherwise.
const DefaultTable = "locker_locks"

// DefaultRetryTimeout bounds the retries of transient errors when the
// caller's context has no earlier deadline.
const DefaultRetryTimeout = 5 * time.Second

// Option configures New.
type Option func(*config)

type config struct {
	table        string
	retryTimeout time.Duration
}

// WithTable sets the lock table's name (default locker_locks): lower-case
// letters, digits and underscores, starting with a letter or underscore, at
// most 48 bytes (the fence sequence and notification channel derive their
// names from it). Tables are independent lock namespaces.
func WithTable(name string) Option { return func(c *config) { c.table = name } }

// WithRetryTimeout sets how long transient errors are retried when the
// caller's context allows longer (default 5s); 0 or less disables retries.
func WithRetryTimeout(d time.Duration) Option { return func(c *config) { c.retryTimeout = d } }

var tableName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,47}$`)

func resolve(opts []Option) (config, error) {
	c := config{table: DefaultTable, retryTimeout: DefaultRetryTimeout}
	for _, o := range opts {
		o(&c)
	}
	if !tableName.MatchString(c.table) {
		return config{}, fmt.Errorf("%w: table name %q: want [a-z_][a-z0-9_]*, at most 48 bytes", ErrInvalidOption, c.table)
	}
	return c, nil
}

// ErrInvalidOption reports a bad option given to New. From a URL parameter
// it also matches locker.ErrInvalidURL.
var ErrInvalidOption = errors.New("locker/sql: invalid option")
