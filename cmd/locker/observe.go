package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/locker-go/locker"
)

// observeFlags defines observe's flags on fs.
func observeFlags(fs *flag.FlagSet, f *adminOpts) {
	fs.StringVar(&f.backend, "backend", "", "backend `URL`")
	fs.BoolVar(&f.json, "json", false, "print each leader as a line of JSON")
}

// leaderOut is a leader as observe --json prints it.
type leaderOut struct {
	Name   string    `json:"name"`
	Leader bool      `json:"leader"` // false: the election has no leader
	Label  string    `json:"label,omitempty"`
	Term   uint64    `json:"term,omitempty"` // the leader's fence
	Since  time.Time `json:"since"`          // when this observer learned of it
}

// observe prints the election's leader, then a line per change, until
// interrupted (exit 0).
func (e env) observe(ctx context.Context, args []string) error {
	ctx, cancel := signalContext(ctx)
	defer cancel()
	var f adminOpts
	fs := newFlags("observe")
	observeFlags(fs, &f)
	no := false
	raw, pos, err := e.adminURL(fs, &f, args, oneKey("observe", &no))
	if err != nil {
		return err
	}
	b, _, err := e.openAdmin(ctx, raw, "observe")
	if err != nil {
		return err
	}
	defer b.Close()
	name := pos[0]
	for l := range locker.Observe(ctx, b.Locker, name) {
		out := leaderOut{Name: name, Leader: l.Fence != 0, Label: l.Label, Term: l.Fence, Since: l.Since}
		if !out.Leader {
			out.Since = time.Now()
		}
		if f.json {
			if err := e.printJSONLine(out); err != nil {
				return err
			}
			continue
		}
		if out.Leader {
			fmt.Fprintf(e.stdout, "%s  %q: leader %q, term %d\n", out.Since.Format(time.RFC3339), name, out.Label, out.Term)
		} else {
			fmt.Fprintf(e.stdout, "%s  %q: no leader\n", out.Since.Format(time.RFC3339), name)
		}
	}
	return nil
}
