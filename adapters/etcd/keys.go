package etcd

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// escape maps a user key to a path segment without '/': '%' and '/' are
// percent-encoded. The mapping is a prefix code applied character by
// character, so escape(a+b) == escape(a)+escape(b), and a range over
// prefix+escape(p) holds exactly the entries of keys beginning with p, while
// prefix+escape(k)+"/" holds exactly k's queue ("a" never sees "a/b" or "ab").
var (
	escape   = strings.NewReplacer("%", "%25", "/", "%2F").Replace
	unescape = strings.NewReplacer("%25", "%", "%2F", "/").Replace
)

// record is the value of a queue entry: its owner and the ids of the
// leases holding it (more than one with re-entry under WithOwner). Holds
// are a set rather than a count so that adding or dropping one is
// idempotent: a write whose reply was lost can be repeated, or undone,
// without adding or dropping anyone else's hold. It is encoded
// deterministically, so a txn can compare the whole value.
type record struct {
	Owner string   `json:"owner"`
	Holds []string `json:"holds"`
}

func (r record) encode() string {
	b, _ := json.Marshal(r) // a string and a slice of strings cannot fail
	return string(b)
}

func (r record) has(hold string) bool { return slices.Contains(r.Holds, hold) }

// with returns r plus hold (r itself if hold is there already).
func (r record) with(hold string) record {
	if !r.has(hold) {
		r.Holds = append(slices.Clip(r.Holds), hold)
	}
	return r
}

// without returns r less hold.
func (r record) without(hold string) record {
	r.Holds = slices.DeleteFunc(slices.Clone(r.Holds), func(h string) bool { return h == hold })
	return r
}

func decodeRecord(v []byte) (record, error) {
	var r record
	if err := json.Unmarshal(v, &r); err != nil {
		return record{}, fmt.Errorf("locker/etcd: entry value %q is not ours: %w", v, err)
	}
	return r, nil
}

// splitEntry turns an entry key back into the user key it queues for.
func splitEntry(prefix, entry string) (string, bool) {
	rest, ok := strings.CutPrefix(entry, prefix)
	if !ok {
		return "", false
	}
	i := strings.LastIndexByte(rest, '/')
	if i < 0 {
		return "", false
	}
	return unescape(rest[:i]), true
}
