package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"strings"

	"github.com/locker-go/locker"
)

// migrate runs `locker migrate check --from URL --to URL [--json] [PREFIX]`:
// the keys held on from but not on to (a process still in phase 1 holds
// them), exit 1 while there is any, 0 when phase 3 is safe.
// migrateOpts are migrate check's flags.
type migrateOpts struct {
	from, to string
	json     bool
}

// migrateFlags defines migrate check's flags on fs.
func migrateFlags(fs *flag.FlagSet, f *migrateOpts) {
	fs.StringVar(&f.from, "from", "", "the backend `URL` processes move from")
	fs.StringVar(&f.to, "to", "", "the backend `URL` processes move to")
	fs.BoolVar(&f.json, "json", false, "print the result as JSON")
}

func (e env) migrate(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "check" {
		return usageErrorf("migrate: want: locker migrate check --from URL --to URL [--json] [PREFIX]")
	}
	ctx, cancel := signalContext(ctx)
	defer cancel()
	var f migrateOpts
	fs := newFlags("migrate check")
	migrateFlags(fs, &f)
	fromFlag, toFlag, asJSON := &f.from, &f.to, &f.json
	pos, err := parseInterleaved(fs, args[1:])
	switch {
	case err != nil:
		return err
	case *fromFlag == "" || *toFlag == "":
		return usageErrorf("migrate check: want --from URL and --to URL")
	case len(pos) > 1:
		return usageErrorf("migrate check: want at most one PREFIX")
	}
	prefix := strings.Join(pos, "")
	from, err := e.listOf(ctx, *fromFlag, prefix)
	if err != nil {
		return err
	}
	to, err := e.listOf(ctx, *toFlag, prefix)
	if err != nil {
		return err
	}
	only := fromOnly(from, to)
	if *asJSON {
		e.migrateJSON(only, len(from))
	} else {
		e.migrateText(only, len(from))
	}
	if len(only) > 0 {
		return exitCode(exitFail)
	}
	return nil
}

// listOf lists the locks of the backend at raw under prefix.
func (e env) listOf(ctx context.Context, raw, prefix string) ([]locker.LockInfo, error) {
	b, err := e.open(ctx, raw)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	adm, ok := b.Locker.(locker.Admin)
	if !ok {
		return nil, fmt.Errorf("backend %s cannot list its locks (its Locker has no locker.Admin)", b.shown)
	}
	infos, err := adm.List(ctx, prefix)
	if err != nil {
		return nil, b.explain(err)
	}
	return infos, nil
}

// fromOnly are the locks of from whose key (in its space) to does not hold.
func fromOnly(from, to []locker.LockInfo) []locker.LockInfo {
	held := map[string]bool{}
	for _, in := range to {
		held[fmt.Sprint(in.Space, in.Key)] = true
	}
	var out []locker.LockInfo
	for _, in := range from {
		if !held[fmt.Sprint(in.Space, in.Key)] {
			out = append(out, in)
		}
	}
	return out
}

func (e env) migrateText(only []locker.LockInfo, checked int) {
	if len(only) == 0 {
		fmt.Fprintf(e.stdout, "safe: every lock held on from is held on to as well (%d checked): no process is left in phase 1\n", checked)
		return
	}
	fmt.Fprintf(e.stdout, "not yet: %d of %d locks held on from are not held on to: a process in phase 1 holds them\n", len(only), checked)
	e.table(only)
}

func (e env) migrateJSON(only []locker.LockInfo, checked int) {
	type lock struct {
		Key     string `json:"key"`
		Subtree bool   `json:"subtree,omitempty"`
		Mode    string `json:"mode"`
		Owner   string `json:"owner"`
		Fence   uint64 `json:"fence"`
	}
	out := struct {
		Safe     bool   `json:"safe"`
		Checked  int    `json:"checked"`
		FromOnly []lock `json:"from_only"`
	}{Safe: len(only) == 0, Checked: checked, FromOnly: []lock{}}
	for _, in := range only {
		for _, h := range in.Holders {
			out.FromOnly = append(out.FromOnly, lock{in.Key, in.Space == locker.SpaceSubtree, modeName(in), h.Owner, h.Fence})
		}
	}
	_ = e.printJSON(out)
}

// sides are the from and to URLs of a migrate: URL (ok false for others):
// status and list show each side.
func sides(raw string) (from, to string, ok bool) {
	u, err := url.Parse(raw)
	if err != nil || !strings.EqualFold(u.Scheme, "migrate") {
		return "", "", false
	}
	q := u.Query()
	return q.Get("from"), q.Get("to"), q.Get("from") != "" && q.Get("to") != ""
}
