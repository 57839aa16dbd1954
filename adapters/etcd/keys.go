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
	// Limit is a Limited entry's n (driver.Limiter); 0 in every other.
	Limit int `json:"limit,omitempty"`
	// Fence is a subtree node's fence where it is not its create
	// revision (see refence); 0: it is.
	Fence int64 `json:"fence,omitempty"`
	// Offset is the prefix's fence offset when the entry was granted
	// (floor.go): its fence is its revision plus Offset.
	Offset int64 `json:"offset,omitempty"`
}

// modeOf is the mode of entry kv; one that is not ours excludes all.
func modeOf(kv *mvccpb.KeyValue) driver.Mode { return slotOf(kv).mode }

// slot is what an entry asks for: its mode and, if Limited, its n.
type slot struct {
	mode  driver.Mode
	limit int
}

// slotOf is the slot of entry kv; one that is not ours is Exclusive.
func slotOf(kv *mvccpb.KeyValue) slot {
	rec, err := decodeRecord(kv.Value)
	if err != nil {
		return slot{mode: driver.Exclusive}
	}
	return slot{rec.Mode, rec.Limit}
}

// slotFor is the slot request r asks for.
func slotFor(r *driver.Request) slot {
	if r.Mode != driver.Limited {
		return slot{mode: r.Mode}
	}
	return slot{driver.Limited, r.Limit}
}

// with reports whether an entry in slot s may hold behind one in slot o:
// Limited entries only behind Limited ones of the same n (and only the
// first n of them: see granted), others as the matrix says.
func (s slot) with(o slot) bool {
	if s.mode == driver.Limited || o.mode == driver.Limited {
		return s == o
	}
	return s.mode.Compatible(o.mode)
}

// granted reports, for each of a queue's entries (by create revision),
// whether it holds the key: whether every entry before it is compatible
// (for a Limited entry of n: Limited of the same n, and fewer than n).
func granted(entries []*mvccpb.KeyValue) []bool {
	out := make([]bool, len(entries))
	slots := make([]slot, len(entries))
	for i, kv := range entries {
		slots[i], out[i] = slotOf(kv), true
		for _, o := range slots[:i] {
			out[i] = out[i] && slots[i].with(o)
		}
		if slots[i].mode == driver.Limited {
			out[i] = out[i] && i < slots[i].limit
		}
	}
	return out
}

// byCreation is entries in create revision order: a read sorted either
// way (the last few of a queue are read newest first).
func byCreation(entries []*mvccpb.KeyValue) []*mvccpb.KeyValue {
	if len(entries) > 1 && entries[0].CreateRevision > entries[1].CreateRevision {
		entries = slices.Clone(entries)
		slices.Reverse(entries)
	}
	return entries
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

// recordOf is the record of call r's own entry: its one hold, r.ID, and
// fence offset off.
func recordOf(r *driver.Request, off int64) record {
	return record{Owner: r.Owner, Holds: []string{r.ID}, Mode: r.Mode, Limit: slotFor(r).limit, Offset: off}
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
