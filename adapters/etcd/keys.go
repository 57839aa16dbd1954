package etcd

import (
	"encoding/json"
	"fmt"
	"strings"
)

// escape maps a user key to a path segment without '/': '%' and '/' are
// percent-encoded. The mapping is a prefix code applied character by
// character, so escape(a+b) == escape(a)+escape(b), and a range over
// prefix+escape(p) holds exactly the entries of keys beginning with p, while
// prefix+escape(k)+"/" holds exactly k's queue ("a" never sees "a/b" or "ab").
var escaper = strings.NewReplacer("%", "%25", "/", "%2F")

func escape(key string) string { return escaper.Replace(key) }

var unescaper = strings.NewReplacer("%25", "%", "%2F", "/")

func unescape(seg string) string { return unescaper.Replace(seg) }

// record is the value of a queue entry. It is encoded deterministically, so
// Release can compare the whole value in one txn.
type record struct {
	Owner string `json:"owner"`
	Holds int    `json:"holds"`
}

func (r record) encode() string {
	b, _ := json.Marshal(r) // a struct of a string and an int cannot fail
	return string(b)
}

func decodeRecord(v []byte) (record, error) {
	var r record
	if err := json.Unmarshal(v, &r); err != nil {
		return record{}, fmt.Errorf("locker/etcd: entry value %q is not ours: %w", v, err)
	}
	if r.Holds < 1 {
		r.Holds = 1
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
