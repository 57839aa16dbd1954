package main

import (
	"encoding/json"
	"time"

	"github.com/locker-go/locker"
)

// lockOut is a lock as status --json and list --json print it: the fields
// an operator's script reads, named as the table's columns are.
type lockOut struct {
	Key     string      `json:"key"`
	Mode    string      `json:"mode"`            // "exclusive", "shared" or "limit"
	Limit   int         `json:"limit,omitempty"` // a limit's N (locker run --limit)
	Space   string      `json:"space"`           // "key", "subtree" for the path of a subtree lock, "election" for an election's name
	Waiters int         `json:"waiters"`
	Holders []holderOut `json:"holders"`
}

// holderOut is one holder; Expires is omitted where the lock lives as
// long as its holder's session (ZooKeeper).
type holderOut struct {
	Owner   string     `json:"owner"`
	Label   string     `json:"label,omitempty"` // who, where, doing what (WithLabel)
	Fence   uint64     `json:"fence"`
	Holds   int        `json:"holds"`
	Expires *time.Time `json:"expires,omitempty"`
}

// lockJSON is in as lockOut.
func lockJSON(in locker.LockInfo) lockOut {
	out := lockOut{Key: in.Key, Mode: "exclusive", Space: "key", Waiters: in.Waiters, Holders: []holderOut{}}
	switch in.Mode {
	case locker.ModeShared:
		out.Mode = "shared"
	case locker.ModeLimited:
		out.Mode, out.Limit = "limit", in.Limit
	}
	switch in.Space {
	case locker.SpaceSubtree:
		out.Space = "subtree"
	case locker.SpaceElection:
		out.Space = "election"
	}
	for _, h := range in.Holders {
		ho := holderOut{Owner: h.Owner, Label: h.Label, Fence: h.Fence, Holds: h.Holds}
		if !h.Expires.IsZero() {
			exp := h.Expires.UTC()
			ho.Expires = &exp
		}
		out.Holders = append(out.Holders, ho)
	}
	return out
}

// printJSON writes v to stdout, indented.
func (e env) printJSON(v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printJSONLine writes v to stdout as one line.
func (e env) printJSONLine(v any) error { return json.NewEncoder(e.stdout).Encode(v) }
