package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/locker-go/locker"
)

// electOpts are elect's flags: run's that apply, and --once.
type electOpts struct {
	runOpts
	once bool
}

// electFlags defines elect's flags on fs.
func electFlags(fs *flag.FlagSet, f *electOpts) {
	fs.StringVar(&f.backend, "backend", "", "backend `URL`")
	fs.DurationVar(&f.ttl, "ttl", locker.DefaultTTL, "term length; renewed every TTL/3 while CMD runs (a dead leader is replaced within it)")
	fs.DurationVar(&f.wait, "wait", 0, "give up campaigning after this long (unset: as long as it takes)")
	fs.DurationVar(&f.grace, "grace", 10*time.Second, "after SIGTERM on loss of leadership, SIGKILL CMD if it still runs")
	fs.StringVar(&f.label, "label", "", "what the leader advertises to `locker observe` (default: user@host pid N: CMD)")
	fs.BoolVar(&f.once, "once", false, "exit when leadership is lost, instead of campaigning again")
	fs.BoolVar(&f.verbose, "v", false, "log to stderr what happens to the term: renewals that failed and were retried, its loss and why")
}

// parseElect parses elect's flags, name and command, checking them before
// any backend is touched.
func parseElect(args []string) (runArgs, bool, error) {
	var (
		a runArgs
		f electOpts
	)
	fs := newFlags("elect")
	electFlags(fs, &f)
	before, cmd, dashed := splitCommand(args)
	if !dashed {
		return a, false, usageErrorf("elect: want NAME -- CMD [ARGS...]")
	}
	names, err := parseInterleaved(fs, before)
	switch {
	case err != nil:
		return a, false, err
	case len(names) != 1:
		return a, false, usageErrorf("elect: want one NAME before --, got %d", len(names))
	case len(cmd) == 0:
		return a, false, usageErrorf("elect: no command to run: locker elect NAME -- CMD [ARGS...]")
	case f.wait < 0 || f.grace < 0:
		return a, false, usageErrorf("elect: --wait and --grace must not be negative")
	case f.ttl > 0 && f.ttl < minRunTTL:
		return a, false, usageErrorf("elect: --ttl %v is below %v, the least TTL a term is kept alive at", f.ttl, minRunTTL)
	}
	label := f.label
	if !isSet(fs, "label") {
		label = defaultLabel(cmd)
	}
	a = runArgs{backend: f.backend, keys: names, cmd: cmd, elect: true, wait: f.wait, grace: f.grace, verbose: f.verbose,
		opts: []locker.Option{locker.WithTTL(f.ttl), locker.WithLabel(label)}}
	if _, err := locker.Resolve(names[0], a.opts...); err != nil {
		return a, false, err
	}
	return a, f.once, nil
}

// elect runs CMD while this process leads the election: as run does with
// a key, but, once leadership is lost and CMD stopped, it campaigns again
// (unless --once). CMD exiting by itself resigns, and ends locker with its
// exit code.
func (e env) elect(ctx context.Context, args []string) error {
	a, once, err := parseElect(args)
	if err != nil {
		return err
	}
	if a.verbose {
		e.logger = slog.New(slog.NewTextHandler(scrubWriter{e.stderr}, nil))
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	for {
		leases, b, err := e.acquire(ctx, sigs, a)
		if err != nil {
			return err
		}
		err = e.supervise(b, leases, a.cmd, sigs, a.grace)
		b.Close()
		if once || exitCodeOf(err) != exitLeaseLost {
			return err
		}
		fmt.Fprintf(e.stderr, "locker: %v; campaigning for %q again\n", scrub(err.Error()), a.keys[0])
	}
}
