package etcd

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// escape maps a user key to a path segment without '/' ('%' and '/' are
// percent-encoded) character by character, so a range over prefix+escape(p)
// holds exactly the entries of keys beginning with p, and
// prefix+escape(k)+"/" exactly k's queue (not "k/b"'s or "kb"'s).
var (
	escape   = strings.NewReplacer("%", "%25", "/", "%2F").Replace
	unescape = strings.NewReplacer("%25", "%", "%2F", "/").Replace
)

// record is the value of a queue entry: its owner and the ids of its
// holds, a set so that a write whose reply was lost can be repeated or
// undone without touching anyone else's hold. Its encoding is
// deterministic, so a txn can compare the whole value.
type record struct {
	Owner string   `json:"owner"`
	Holds []string `json:"holds"`
}

func (r record) encode() string {
	b, _ := json.Marshal(r) // a string and a slice of strings cannot fail
	return string(b)
}

func (r record) has(hold string) bool { return slices.Contains(r.Holds, hold) }

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
