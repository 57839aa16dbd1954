// Package rediskey holds what the Redis-based adapters share about key
// names.
package rediskey

import (
	"context"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// MatchPrefix returns the SCAN/KEYS pattern that matches exactly the keys
// beginning with prefix: the glob characters of prefix are quoted, so a
// user key holding '*' or '[' matches only itself.
func MatchPrefix(prefix string) string {
	var b strings.Builder
	for _, r := range prefix {
		if strings.ContainsRune(`*?[]\^-`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String() + "*"
}

// Scan returns the keys of c's node that match the pattern match.
func Scan(ctx context.Context, c goredis.UniversalClient, match string) ([]string, error) {
	var keys []string
	it := c.Scan(ctx, 0, match, 1000).Iterator()
	for it.Next(ctx) {
		keys = append(keys, it.Val())
	}
	return keys, it.Err()
}
