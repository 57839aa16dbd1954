package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/locker-go/locker"
)

// adminBackend parses the common --backend flag, opens the backend and
// returns its Admin side.
// valid checks the positional arguments before the backend is touched.
func (e env) adminBackend(ctx context.Context, fs *flag.FlagSet, f *adminOpts, args []string, valid func(pos []string) error) (*backend, locker.Admin, []string, error) {
	raw, pos, err := e.adminURL(fs, f, args, valid)
	if err != nil {
		return nil, nil, nil, err
	}
	b, adm, err := e.openAdmin(ctx, raw, fs.Name())
	return b, adm, pos, err
}

// adminOpts are the flags of status, list and unlock.
type adminOpts struct {
	backend        string
	subtree, force bool
	json, watch    bool
	interval       time.Duration
}

// statusFlags, listFlags and unlockFlags define each command's flags on fs.
func statusFlags(fs *flag.FlagSet, f *adminOpts) {
	fs.StringVar(&f.backend, "backend", "", "backend `URL`")
	fs.BoolVar(&f.subtree, "subtree", false, "KEY is the path of a subtree lock")
	fs.BoolVar(&f.json, "json", false, "print the lock as JSON")
}

func listFlags(fs *flag.FlagSet, f *adminOpts) {
	fs.StringVar(&f.backend, "backend", "", "backend `URL`")
	fs.BoolVar(&f.json, "json", false, "print the locks as JSON, an array")
	fs.BoolVar(&f.watch, "watch", false, "list again each --interval, until Ctrl-C: redrawn at a terminal, else printed when the locks change (with --json, a line each)")
	fs.DurationVar(&f.interval, "interval", time.Second, "with --watch: how often to look")
}

func unlockFlags(fs *flag.FlagSet, f *adminOpts) {
	fs.StringVar(&f.backend, "backend", "", "backend `URL`")
	fs.BoolVar(&f.force, "force", false, "release the key whoever holds it")
	fs.BoolVar(&f.subtree, "subtree", false, "KEY is the path of a subtree lock")
}

// adminURL parses the flags and the positional arguments, which valid
// checks before any backend is touched, and picks the backend URL.
func (e env) adminURL(fs *flag.FlagSet, f *adminOpts, args []string, valid func(pos []string) error) (string, []string, error) {
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return "", nil, err
	}
	if err := valid(pos); err != nil {
		return "", nil, err
	}
	raw, err := e.backendURL(f.backend)
	return raw, pos, err
}

// openAdmin opens the backend at raw for the command cmd, with its Admin.
func (e env) openAdmin(ctx context.Context, raw, cmd string) (*backend, locker.Admin, error) {
	b, err := e.open(ctx, raw)
	if err != nil {
		return nil, nil, err
	}
	adm, ok := b.Locker.(locker.Admin)
	if !ok {
		b.Close()
		return nil, nil, fmt.Errorf("backend %s does not support %s (its Locker has no locker.Admin)", b.shown, cmd)
	}
	return b, adm, nil
}

// eachSide runs fn on the backend at raw, or, for a migrate: URL, on each
// of its sides in turn under a heading: status and list show both.
func (e env) eachSide(ctx context.Context, raw, cmd string, fn func(b *backend, adm locker.Admin) error) error {
	from, to, ok := sides(raw)
	if !ok {
		b, adm, err := e.openAdmin(ctx, raw, cmd)
		if err != nil {
			return err
		}
		defer b.Close()
		return fn(b, adm)
	}
	var first error
	for i, side := range []string{from, to} {
		fmt.Fprintf(e.stdout, "%s %s:\n", [...]string{"from", "to"}[i], redactURL(side))
		err := e.eachSide(ctx, side, cmd, fn)
		var code exitCode
		if err != nil && !errors.As(err, &code) {
			return err
		}
		if first == nil {
			first = err
		}
	}
	return first
}

func signalContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}

func (e env) status(ctx context.Context, args []string) error {
	ctx, cancel := signalContext(ctx)
	defer cancel()
	var f adminOpts
	fs := newFlags("status")
	statusFlags(fs, &f)
	raw, pos, err := e.adminURL(fs, &f, args, oneKey("status", &f.subtree))
	if err != nil {
		return err
	}
	return e.eachSide(ctx, raw, "status", func(b *backend, adm locker.Admin) error {
		info, err := adm.Status(ctx, pos[0], spaceOpts(f.subtree)...)
		if errors.Is(err, locker.ErrNotHeld) {
			if f.json {
				fmt.Fprintln(e.stdout, "null")
			} else {
				fmt.Fprintf(e.stdout, "%q is free\n", pos[0])
			}
			return exitCode(exitFail)
		}
		if err != nil {
			return b.explain(err)
		}
		if f.json {
			return e.printJSON(lockJSON(info))
		}
		e.table([]locker.LockInfo{info})
		return nil
	})
}

func (e env) list(ctx context.Context, args []string) error {
	ctx, cancel := signalContext(ctx)
	defer cancel()
	var f adminOpts
	fs := newFlags("list")
	listFlags(fs, &f)
	raw, pos, err := e.adminURL(fs, &f, args, func(pos []string) error {
		switch {
		case len(pos) > 1:
			return usageErrorf("list: want at most one PREFIX")
		case f.watch && f.interval <= 0:
			return usageErrorf("list: --interval must be positive")
		}
		return nil
	})
	if err != nil {
		return err
	}
	prefix := strings.Join(pos, "")
	if f.watch {
		b, adm, err := e.openAdmin(ctx, raw, "list")
		if err != nil {
			return err
		}
		defer b.Close()
		return e.watchList(ctx, b, adm, prefix, f)
	}
	return e.eachSide(ctx, raw, "list", func(b *backend, adm locker.Admin) error {
		infos, err := adm.List(ctx, prefix)
		if err != nil {
			return b.explain(err)
		}
		if f.json {
			out := make([]lockOut, len(infos))
			for i, in := range infos {
				out[i] = lockJSON(in)
			}
			return e.printJSON(out)
		}
		e.table(infos)
		return nil
	})
}

func (e env) unlock(ctx context.Context, args []string) error {
	ctx, cancel := signalContext(ctx)
	defer cancel()
	var f adminOpts
	fs := newFlags("unlock")
	unlockFlags(fs, &f)
	b, adm, pos, err := e.adminBackend(ctx, fs, &f, args, func(pos []string) error {
		if !f.force {
			return usageErrorf("unlock: only an admin release exists: locker unlock --force KEY (the holder's lease is then lost)")
		}
		return oneKey("unlock", &f.subtree)(pos)
	})
	if err != nil {
		return err
	}
	defer b.Close()
	err = adm.ForceUnlock(ctx, pos[0], spaceOpts(f.subtree)...)
	if errors.Is(err, locker.ErrNotHeld) {
		fmt.Fprintf(e.stderr, "locker: %q was not held\n", pos[0])
		return exitCode(exitFail)
	}
	if err != nil {
		return b.explain(err)
	}
	fmt.Fprintf(e.stdout, "released %q; its holders' leases are lost\n", pos[0])
	return nil
}

// oneKey checks the one positional argument: a key, or with *subtree a path.
func oneKey(cmd string, subtree *bool) func([]string) error {
	return func(pos []string) error {
		if len(pos) != 1 {
			return usageErrorf("%s: want one KEY", cmd)
		}
		if *subtree {
			return locker.ValidatePath(pos[0])
		}
		return locker.ValidateKey(pos[0])
	}
}

// spaceOpts selects the subtree space for Status and ForceUnlock.
func spaceOpts(subtree bool) []locker.Option {
	if subtree {
		return []locker.Option{locker.Subtree()}
	}
	return nil
}

// modeName is how a lock is held: exclusive or shared, of a key or a subtree.
func modeName(in locker.LockInfo) string {
	m := "exclusive"
	switch in.Mode {
	case locker.ModeShared:
		m = "shared"
	case locker.ModeLimited:
		m = fmt.Sprintf("limit %d", in.Limit)
	}
	switch in.Space {
	case locker.SpaceSubtree:
		m = "subtree " + m
	case locker.SpaceElection:
		m = "leader" // an election's (locker elect)
	}
	return m
}

// table prints locks as KEY MODE OWNER FENCE HOLDS EXPIRES WAITERS LABEL, a row
// per holder: a shared lock has one for each.
func (e env) table(infos []locker.LockInfo) {
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "KEY\tMODE\tOWNER\tFENCE\tHOLDS\tEXPIRES\tWAITERS\tLABEL")
	now := time.Now()
	for _, in := range infos {
		for _, h := range in.Holders {
			exp := "with its session"
			if !h.Expires.IsZero() {
				exp = fmt.Sprintf("%s (in %v)", h.Expires.Local().Format(time.RFC3339), h.Expires.Sub(now).Round(time.Millisecond))
			}
			fmt.Fprintf(w, "%q\t%s\t%s\t%d\t%d\t%s\t%d\t%s\n", in.Key, modeName(in), h.Owner, h.Fence, h.Holds, exp, in.Waiters, h.Label)
		}
	}
	w.Flush()
}
