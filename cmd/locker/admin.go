package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/locker-go/locker"
)

// adminBackend parses the common --backend flag, opens the backend and
// returns its Admin side.
// valid checks the positional arguments before the backend is touched.
func (e env) adminBackend(ctx context.Context, fs *flag.FlagSet, args []string, valid func(pos []string) error) (*backend, locker.Admin, []string, error) {
	backendFlag := fs.String("backend", "", "backend URL")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := valid(pos); err != nil {
		return nil, nil, nil, err
	}
	raw, err := e.backendURL(*backendFlag)
	if err != nil {
		return nil, nil, nil, err
	}
	b, err := e.open(ctx, raw)
	if err != nil {
		return nil, nil, nil, err
	}
	adm, ok := b.Locker.(locker.Admin)
	if !ok {
		b.Close()
		return nil, nil, nil, fmt.Errorf("backend %s does not support %s (its Locker has no locker.Admin)", b.shown, fs.Name())
	}
	return b, adm, pos, nil
}

func signalContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}

func (e env) status(ctx context.Context, args []string) error {
	ctx, cancel := signalContext(ctx)
	defer cancel()
	b, adm, pos, err := e.adminBackend(ctx, newFlags("status"), args, oneKey("status"))
	if err != nil {
		return err
	}
	defer b.Close()
	info, err := adm.Status(ctx, pos[0])
	if errors.Is(err, locker.ErrNotHeld) {
		fmt.Fprintf(e.stdout, "%q is free\n", pos[0])
		return exitCode(exitFail)
	}
	if err != nil {
		return b.explain(err)
	}
	e.table([]locker.LockInfo{info})
	return nil
}

func (e env) list(ctx context.Context, args []string) error {
	ctx, cancel := signalContext(ctx)
	defer cancel()
	b, adm, pos, err := e.adminBackend(ctx, newFlags("list"), args, func(pos []string) error {
		if len(pos) > 1 {
			return usageErrorf("list: want at most one PREFIX")
		}
		return nil
	})
	if err != nil {
		return err
	}
	defer b.Close()
	prefix := ""
	if len(pos) == 1 {
		prefix = pos[0]
	}
	infos, err := adm.List(ctx, prefix)
	if err != nil {
		return b.explain(err)
	}
	e.table(infos)
	return nil
}

func (e env) unlock(ctx context.Context, args []string) error {
	ctx, cancel := signalContext(ctx)
	defer cancel()
	fs := newFlags("unlock")
	force := fs.Bool("force", false, "release the key whoever holds it")
	b, adm, pos, err := e.adminBackend(ctx, fs, args, func(pos []string) error {
		if !*force {
			return usageErrorf("unlock: only an admin release exists: locker unlock --force KEY (the holder's lease is then lost)")
		}
		return oneKey("unlock")(pos)
	})
	if err != nil {
		return err
	}
	defer b.Close()
	err = adm.ForceUnlock(ctx, pos[0])
	if errors.Is(err, locker.ErrNotHeld) {
		fmt.Fprintf(e.stderr, "locker: %q was not held\n", pos[0])
		return exitCode(exitFail)
	}
	if err != nil {
		return b.explain(err)
	}
	fmt.Fprintf(e.stdout, "released %q; its holder's lease is lost\n", pos[0])
	return nil
}

func oneKey(cmd string) func([]string) error {
	return func(pos []string) error {
		if len(pos) != 1 {
			return usageErrorf("%s: want one KEY", cmd)
		}
		return locker.ValidateKey(pos[0])
	}
}

// table prints locks as KEY OWNER FENCE HOLDS EXPIRES WAITERS.
func (e env) table(infos []locker.LockInfo) {
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "KEY\tOWNER\tFENCE\tHOLDS\tEXPIRES\tWAITERS")
	now := time.Now()
	for _, in := range infos {
		exp := "with its session"
		if !in.Expires.IsZero() {
			exp = fmt.Sprintf("%s (in %v)", in.Expires.Local().Format(time.RFC3339), in.Expires.Sub(now).Round(time.Millisecond))
		}
		fmt.Fprintf(w, "%q\t%s\t%d\t%d\t%s\t%d\n", in.Key, in.Owner, in.Fence, in.Holds, exp, in.Waiters)
	}
	w.Flush()
}
