package locker

import (
	"strings"
	"time"
)

// Subtree locks are multiple-granularity locking (Gray et al.) over the
// driver's modes: a lock on "a/b/c" holds the Subtree-space nodes "a" and
// "a/b" in an intention mode (IntentExclusive, or IntentShared for a
// shared lock) and "a/b/c" itself Exclusive (or Shared), taken root first
// (lockall.go's group call). Two locks conflict exactly when one path
// equals or lies below the other and either is exclusive: they meet on the
// upper path's node, where it holds X or S and the other X or S, or an
// intention mode that X or S excludes. Paths are compared by segment, so
// "a/b" never meets "a/bc". The lease's fence is its own node's, which
// the driver draws from a counter the tree shares. Over a driver without
// modes, the top-level node alone is taken, exclusive: more is locked,
// never less.

// ancestors returns the paths above path, the top-level one first:
// "a/b/c" has "a" and "a/b".
func ancestors(path string) []string {
	var up []string
	for i := range len(path) {
		if path[i] == '/' {
			up = append(up, path[:i])
		}
	}
	return up
}

// within reports whether path lies at or below root, by segments.
func within(path, root string) bool {
	return path == root || strings.HasPrefix(path, root+"/")
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
