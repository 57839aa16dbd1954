package etcd

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/locker-go/locker/driver"
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
	Owner string      `json:"owner"`
	Holds []string    `json:"holds"`
	Mode  driver.Mode `json:"mode,omitempty"` // Exclusive (0) in entries written before modes
	// Fence is a subtree node's fence where it is not its create
	// revision (see refence); 0: it is.
	Fence int64 `json:"fence,omitempty"`
	// Offset is the prefix's fence offset when the entry was granted
	// (floor.go): its fence is its revision plus Offset.
	Offset int64 `json:"offset,omitempty"`
}

// modeOf is the mode of entry kv; one that is not ours excludes all.
func modeOf(kv *mvccpb.KeyValue) driver.Mode {
	rec, err := decodeRecord(kv.Value)
	if err != nil {
		return driver.Exclusive
	}
	return rec.Mode
}

// granted reports, for each of a queue's entries (by create revision),
// whether it holds the key: whether every entry before it is compatible.
func granted(entries []*mvccpb.KeyValue) []bool {
	out := make([]bool, len(entries))
	modes := make([]driver.Mode, len(entries))
	for i, kv := range entries {
		modes[i], out[i] = modeOf(kv), true
		for _, m := range modes[:i] {
			out[i] = out[i] && modes[i].Compatible(m)
		}
	}
	return out
}

// lastIncompatible is the last of entries that mode m is not compatible
// with: the one to wait for, none if m may hold.
func lastIncompatible(entries []*mvccpb.KeyValue, m driver.Mode) *mvccpb.KeyValue {
	for i := len(entries) - 1; i >= 0; i-- {
		if !m.Compatible(modeOf(entries[i])) {
			return entries[i]
		}
	}
	return nil
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

// splitEntry turns an entry key back into the user key it queues for,
// in the space its prefix says.
func splitEntry(prefix, entry string) (string, driver.Space, bool) {
	rest, ok := strings.CutPrefix(entry, prefix)
	if !ok {
		return "", 0, false
	}
	space := driver.Plain
	if r, ok := strings.CutPrefix(rest, subtreeMark); ok {
		rest, space = r, driver.Subtree
	}
	i := strings.LastIndexByte(rest, '/')
	if i < 0 {
		return "", 0, false
	}
	return unescape(rest[:i]), space, true
}
