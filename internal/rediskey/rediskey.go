// Package rediskey holds what the Redis-based adapters share about key
// names.
package rediskey

import "strings"

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
