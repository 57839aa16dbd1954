package history

import (
	"errors"
	"testing"
)

// mop appends an operation on key in a mode (shared) and space (subtree).
func (r *Recorder) mop(client int, k kind, key string, shared, subtree bool, lease int, call, ret int64, res result, fence uint64) {
	in := input{kind: k, key: key, shared: shared, subtree: subtree, lease: lease}
	r.add(client, in, call, output{result: res, fence: fence}, ret)
}

func TestModelModes(t *testing.T) {
	const S, X = true, false
	plain := func(r *Recorder, c int, k kind, shared bool, lease int, call, ret int64, res result, fence uint64) {
		r.mop(c, k, "k", shared, false, lease, call, ret, res, fence)
	}
	tree := func(r *Recorder, c int, k kind, path string, shared bool, lease int, call, ret int64, res result, fence uint64) {
		r.mop(c, k, path, shared, true, lease, call, ret, res, fence)
	}
	for _, tc := range []struct {
		name  string
		build func(r *Recorder)
		legal bool
	}{
		{"two readers", func(r *Recorder) {
			plain(r, 0, acquire, S, 1, 0, 10, ok, 1)
			plain(r, 1, acquire, S, 2, 11, 12, ok, 2)
		}, true},
		{"a writer beside a reader", func(r *Recorder) {
			plain(r, 0, acquire, S, 1, 0, 10, ok, 1)
			plain(r, 1, acquire, X, 2, 11, 12, ok, 2)
		}, false},
		{"a reader's fence below an earlier reader's", func(r *Recorder) {
			plain(r, 0, acquire, S, 1, 0, 10, ok, 5)
			plain(r, 1, acquire, S, 2, 11, 12, ok, 4)
		}, false},
		{"a reader refused beside readers only", func(r *Recorder) {
			plain(r, 0, acquire, S, 1, 0, 10, ok, 1)
			plain(r, 1, acquire, S, 0, 11, 12, refused, 0)
		}, false},
		{"subtree: a/b beside a/bc", func(r *Recorder) {
			tree(r, 0, acquire, "a/b", X, 1, 0, 10, ok, 1)
			tree(r, 1, acquire, "a/bc", X, 2, 11, 12, ok, 2)
		}, true},
		{"subtree: a descendant beside a held path", func(r *Recorder) {
			tree(r, 0, acquire, "a/b", X, 1, 0, 10, ok, 1)
			tree(r, 1, acquire, "a/b/c/d", S, 2, 11, 12, ok, 2)
		}, false},
		{"subtree: an ancestor beside a held path", func(r *Recorder) {
			tree(r, 0, acquire, "a/b/c", S, 1, 0, 10, ok, 1)
			tree(r, 1, acquire, "a", X, 2, 11, 12, ok, 2)
		}, false},
		{"subtree: readers at two depths", func(r *Recorder) {
			tree(r, 0, acquire, "a", S, 1, 0, 10, ok, 1)
			tree(r, 1, acquire, "a/b/c", S, 2, 11, 12, ok, 2)
		}, true},
		{"subtree: a writer below, after a writer above, with a lower fence", func(r *Recorder) {
			tree(r, 0, acquire, "a", X, 1, 0, 10, ok, 7)
			tree(r, 0, release, "a", X, 1, 20, 30, ok, 0)
			tree(r, 1, acquire, "a/b", X, 2, 31, 40, ok, 6)
		}, false},
		{"subtree: an unrelated path's lower fence", func(r *Recorder) {
			tree(r, 0, acquire, "a/x", X, 1, 0, 10, ok, 7)
			tree(r, 0, release, "a/x", X, 1, 20, 30, ok, 0)
			tree(r, 1, acquire, "a/y", X, 2, 31, 40, ok, 6)
		}, true},
		{"subtree and plain keys of one name are apart", func(r *Recorder) {
			tree(r, 0, acquire, "a", X, 1, 0, 10, ok, 1)
			plain(r, 1, acquire, X, 2, 11, 12, ok, 2)
			r.mop(2, acquire, "a", false, false, 3, 13, 14, ok, 1)
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := New()
			tc.build(r)
			err := r.Check(t.Context())
			var v *Violation
			if tc.legal && err != nil || !tc.legal && !errors.As(err, &v) {
				t.Fatalf("Check = %v; want legal: %v", err, tc.legal)
			}
		})
	}
}
