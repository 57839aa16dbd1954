package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/mattn/go-isatty"

	"github.com/locker-go/locker"
)

// watchList is list --watch: the locks beginning with prefix, again each
// interval. At a terminal the table is redrawn in place each time (its
// expiry countdowns move); elsewhere (a pipe, a log) a table, or with
// --json one line of JSON, is printed only when the locks changed: a key
// taken or let go, a holder, fence or waiter count. It ends, exit 0, when
// ctx does (Ctrl-C).
func (e env) watchList(ctx context.Context, b *backend, adm locker.Admin, prefix string, f adminOpts) error {
	tty := !f.json && e.stdout == os.Stdout && isatty.IsTerminal(os.Stdout.Fd())
	tick := time.NewTicker(f.interval)
	defer tick.Stop()
	last := "\x00" // no list printed yet
	for {
		infos, err := adm.List(ctx, prefix)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			return b.explain(err)
		}
		if sig := signature(infos); tty || sig != last {
			last = sig
			e.drawList(infos, f.json, tty)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// drawList prints one state of the list: clearing a terminal first, or
// after a timestamped line elsewhere; JSON compact, a line per state.
func (e env) drawList(infos []locker.LockInfo, asJSON, tty bool) {
	if asJSON {
		out := make([]lockOut, len(infos))
		for i, in := range infos {
			out[i] = lockJSON(in)
		}
		_ = e.printJSONLine(out)
		return
	}
	if tty {
		fmt.Fprint(e.stdout, "\x1b[H\x1b[2J") // home, clear
	}
	fmt.Fprintf(e.stdout, "%s  %d locks\n", time.Now().Format(time.TimeOnly), len(infos))
	e.table(infos)
}

// signature is what list --watch compares: every field but the expiries,
// which renewals move.
func signature(infos []locker.LockInfo) string {
	var b strings.Builder
	for _, in := range infos {
		fmt.Fprintf(&b, "%q %v %v %d;", in.Key, in.Mode, in.Space, in.Waiters)
		for _, h := range in.Holders {
			fmt.Fprintf(&b, "%q %d %d,", h.Owner, h.Fence, h.Holds)
		}
	}
	return b.String()
}
