package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/locker-go/locker"
)

// unlockTimeout bounds the final Unlock; after it the lock still lapses
// within its TTL.
const unlockTimeout = 10 * time.Second

// interrupted is why acquiring stopped when locker got a signal.
type interrupted struct{ sig os.Signal }

func (i interrupted) Error() string { return "interrupted by " + sigName(i.sig) }

// runArgs is what `locker run` was asked to do.
type runArgs struct {
	backend string
	keys    []string // in the order given; several are taken all or none
	cmd     []string
	opts    []locker.Option
	try     bool
	elect   bool // keys[0] is an election's name, taken by Campaign (locker elect)
	wait    time.Duration
	grace   time.Duration
	verbose bool // log the lease's rare events (-v)
}

func (e env) run(ctx context.Context, args []string) error {
	a, err := parseRun(args)
	if err != nil {
		return err
	}
	if a.verbose {
		e.logger = slog.New(slog.NewTextHandler(scrubWriter{e.stderr}, nil))
	}
	// Catch signals before anything else, so locker lives to unlock.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)

	leases, b, err := e.acquire(ctx, sigs, a)
	if err != nil {
		return err
	}
	defer b.Close()
	return e.supervise(b, leases, a.cmd, sigs, a.grace)
}

// minRunTTL is the least --ttl: below it a renewal, due every TTL/3, could
// not reach the backend in time on any network. (Backends refuse what
// they cannot honour, too: etcd below 1s, ZooKeeper below its servers'
// minimum session timeout.)
const minRunTTL = 100 * time.Millisecond

// runOpts are run's flags.
type runOpts struct {
	backend          string
	ttl, wait, grace time.Duration
	try, verbose     bool
	shared, subtree  bool
	shell, label     string
	limit            int
}

// runFlags defines run's flags on fs.
func runFlags(fs *flag.FlagSet, f *runOpts) {
	fs.StringVar(&f.backend, "backend", "", "backend `URL`")
	fs.DurationVar(&f.ttl, "ttl", locker.DefaultTTL, "lease length; renewed every TTL/3 while CMD runs")
	fs.DurationVar(&f.wait, "wait", 0, "give up after waiting this long; 0: do not wait, as --try (unset: wait as long as it takes)")
	fs.BoolVar(&f.try, "try", false, "fail at once if the key is held (--wait 0)")
	fs.DurationVar(&f.grace, "grace", 10*time.Second, "after SIGTERM on lease loss, SIGKILL CMD if it still runs")
	fs.BoolVar(&f.shared, "shared", false, "take the keys shared (read locks): many shared holders at once, or one exclusive")
	fs.BoolVar(&f.subtree, "subtree", false, "each KEY is a '/'-separated path: lock it and every path below it")
	fs.IntVar(&f.limit, "limit", 0, "a counting semaphore: up to `N` holders of KEY at once (every holder must give the same N)")
	fs.StringVar(&f.label, "label", "", "describe the holder to `locker status` (default: user@host pid N: CMD)")
	fs.BoolVar(&f.verbose, "v", false, "log to stderr what happens to the lease: renewals that failed and were retried, its loss and why")
	fs.StringVar(&f.shell, "c", "", "run the shell `command` with sh -c instead of CMD, as flock(1) does: locker run -c 'CMD' KEY")
}

// parseRun parses run's flags, keys and command, and checks the keys and
// options before any backend is touched.
func parseRun(args []string) (runArgs, error) {
	var (
		a runArgs
		f runOpts
	)
	fs := newFlags("run")
	runFlags(fs, &f)
	var err error
	if a.keys, a.cmd, err = runPositionals(fs, &f, args); err != nil {
		return a, err
	}
	a.backend, a.grace, a.verbose = f.backend, f.grace, f.verbose
	switch {
	case len(a.keys) == 0 && len(a.cmd) == 0:
		return a, usageErrorf("run: want KEY [KEY...] -- CMD [ARGS...]")
	case len(a.keys) == 0:
		return a, usageErrorf("run: no KEY before --: locker run KEY [KEY...] -- CMD [ARGS...]")
	case len(a.cmd) == 0:
		return a, usageErrorf("run: no command to run: locker run KEY [KEY...] -- CMD [ARGS...]")
	case f.try && f.wait > 0:
		return a, usageErrorf("run: --try and --wait exclude each other")
	case isSet(fs, "limit") && (f.shared || f.subtree):
		return a, usageErrorf("run: --limit does not combine with --shared or --subtree")
	case f.wait < 0 || f.grace < 0:
		return a, usageErrorf("run: --wait and --grace must not be negative")
	case f.ttl > 0 && f.ttl < minRunTTL:
		return a, usageErrorf("run: --ttl %v is below %v, the least TTL a lease is kept alive at (renewed every TTL/3, each renewal a round trip); etcd and ZooKeeper need 1s or more", f.ttl, minRunTTL)
	}
	// --wait 0 is --try: no wait at all; without --wait, as long as it takes.
	a.try, a.wait = f.try || (f.wait == 0 && isSet(fs, "wait")), f.wait
	label := f.label
	if !isSet(fs, "label") {
		label = defaultLabel(a.cmd)
	}
	a.opts = []locker.Option{locker.WithTTL(f.ttl), locker.WithLabel(label)}
	if f.shared {
		a.opts = append(a.opts, locker.Shared())
	}
	if f.subtree {
		a.opts = append(a.opts, locker.Subtree())
	}
	if isSet(fs, "limit") {
		a.opts = append(a.opts, locker.Limit(f.limit))
	}
	for _, k := range a.keys { // bad keys or TTL: fail before touching the backend
		if _, err := locker.Resolve(k, a.opts...); err != nil {
			return a, err
		}
	}
	return a, nil
}

// runPositionals parses run's arguments with fs: the keys and the command.
// After "--", the command; without one, flags end at KEY and the command
// follows it; with -c, the command is sh -c's and every argument a key.
func runPositionals(fs *flag.FlagSet, f *runOpts, args []string) (keys, cmd []string, err error) {
	if before, after, dashed := splitCommand(args); dashed {
		keys, err = parseInterleaved(fs, before)
		cmd = after
	} else if err = fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return nil, nil, err
	} else if err != nil {
		return nil, nil, usageErrorf("run: %v", err)
	} else if f.shell != "" {
		keys, err = parseInterleaved(fs, fs.Args()) // flags may follow the keys
	} else if fs.NArg() > 0 {
		keys, cmd = fs.Args()[:1], fs.Args()[1:]
	}
	if err != nil || f.shell == "" {
		return keys, cmd, err
	}
	if len(cmd) > 0 {
		return nil, nil, usageErrorf("run: -c and a CMD exclude each other: locker run -c 'CMD' KEY [KEY...]")
	}
	return keys, []string{"/bin/sh", "-c", f.shell}, nil
}

// acquire opens the backend and takes the keys; a signal meanwhile
// abandons them.
func (e env) acquire(ctx context.Context, sigs <-chan os.Signal, a runArgs) ([]locker.Lease, *backend, error) {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := make(chan struct{})
	watched := make(chan os.Signal, 1)
	go func() {
		select {
		case s := <-sigs:
			watched <- s
			cancel(interrupted{s})
		case <-stop:
			close(watched)
		}
	}()
	leases, b, err := e.take(actx, a)
	close(stop)
	if s, ok := <-watched; ok { // interrupted, even if the lock came through
		for _, l := range leases {
			_ = unlock(l)
		}
		if b != nil {
			b.Close()
		}
		fmt.Fprintf(e.stderr, "locker: interrupted by %s while waiting for %s; nothing is held\n", sigName(s), quoteKeys(a.keys))
		return nil, nil, exitCode(128 + sigNum(s))
	}
	return leases, b, err
}

func (e env) take(ctx context.Context, a runArgs) ([]locker.Lease, *backend, error) {
	raw, err := e.backendURL(a.backend)
	if err != nil {
		return nil, nil, err
	}
	b, err := e.open(ctx, raw)
	if err != nil {
		return nil, nil, err
	}
	lock := func(ctx context.Context) ([]locker.Lease, error) {
		if a.elect {
			lead, err := locker.Campaign(ctx, b, a.keys[0], a.opts...)
			if err != nil {
				return nil, err
			}
			return []locker.Lease{lead}, nil
		}
		if a.try {
			return locker.TryLockAll(ctx, b, a.keys, a.opts...)
		}
		return locker.LockAll(ctx, b, a.keys, a.opts...)
	}
	var leases []locker.Lease
	if a.wait > 0 {
		wctx, cancel := context.WithTimeout(ctx, a.wait)
		leases, err = lock(wctx)
		cancel()
	} else {
		leases, err = lock(ctx)
	}
	switch {
	case a.try && errors.Is(err, locker.ErrLocked):
		err = withCode(exitTempFail, fmt.Errorf("%s held by another owner%s; not waiting (--try)", heldWhat(a.keys), holderOf(ctx, b, a)))
	case a.wait > 0 && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		err = withCode(exitTempFail, fmt.Errorf("%s still held after waiting %v (--wait)%s", heldWhat(a.keys), a.wait, holderOf(ctx, b, a)))
	}
	if err != nil {
		b.Close()
		return nil, nil, b.explain(err)
	}
	return leases, b, nil
}

// heldWhat names the keys in "... is held" messages.
func heldWhat(keys []string) string {
	if len(keys) == 1 {
		return fmt.Sprintf("%q is", keys[0])
	}
	return quoteKeys(keys) + ": one or more are"
}

func quoteKeys(keys []string) string {
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = strconv.Quote(k)
	}
	return strings.Join(q, ", ")
}

// holderOf describes who holds the first held key, for messages; best effort.
func holderOf(ctx context.Context, b *backend, a runArgs) string {
	adm, ok := b.Locker.(locker.Admin)
	if !ok || a.elect {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for _, key := range a.keys {
		info, err := adm.Status(ctx, key, a.opts...)
		if err != nil {
			continue
		}
		s := fmt.Sprintf(" (%q: %s by owner %s, fence %d", key, modeName(info), info.Owner, info.Fence)
		if n := len(info.Holders); n > 1 {
			s += fmt.Sprintf(", and %d more", n-1)
		}
		if !info.Expires.IsZero() {
			s += fmt.Sprintf(", expires in %v", time.Until(info.Expires).Round(time.Millisecond))
		}
		return s + ")"
	}
	return ""
}

// supervise runs CMD while the leases are held and returns its exit code.
func (e env) supervise(b *backend, leases []locker.Lease, cmdArgs []string, sigs <-chan os.Signal, grace time.Duration) error {
	c, err := startChild(cmdArgs, leaseEnv(leases))
	if err != nil {
		unlockAll(leases)
		return err
	}
	var (
		leaseDone = anyDone(leases)
		lost      error
		kill      <-chan time.Time
		stopped   <-chan struct{}
	)
	if c.tty >= 0 {
		stopped = c.stops() // Ctrl-Z: job control as in a shell
	}
	lose := func(l locker.Lease) {
		leaseDone, lost = nil, l.Err()
		if lost == nil {
			lost = locker.ErrLeaseLost
		}
		fmt.Fprintf(e.stderr, "locker: lost the lease on %q (%s): stopping %s with SIGTERM\n", l.Key(), scrub(lost.Error()), cmdArgs[0])
		c.signal(syscall.SIGTERM)
		kill = time.After(grace)
	}
	for running := true; running; {
		select {
		case <-c.done:
			running = false
		case <-stopped:
			c.suspend()
			// Lost while stopped (its Deadline passed, though Done may
			// not have closed yet): CMD goes on only to its SIGTERM.
			for _, l := range leases {
				if leaseDone != nil && (l.Err() != nil || !time.Now().Before(l.Deadline())) {
					lose(l)
				}
			}
			c.resume()
		case l := <-leaseDone:
			lose(l)
		case <-kill:
			fmt.Fprintf(e.stderr, "locker: %s still runs %v after SIGTERM: sending SIGKILL\n", cmdArgs[0], grace)
			c.signal(syscall.SIGKILL)
		case s := <-sigs:
			c.signal(s) // CMD decides what the signal means; its exit ends locker
		}
	}
	c.restoreTerminal()
	return e.finish(b, leases, cmdArgs[0], c.exitCode(), lost)
}

// finish unlocks the leases once CMD has exited with code and says how it went.
func (e env) finish(b *backend, leases []locker.Lease, cmd string, code int, lost error) error {
	what := quoteKeys(keysOf(leases))
	if lost != nil {
		for _, l := range leases {
			_ = l.Unlock(context.Background()) // frees local resources (and the keys still held)
		}
		return withCode(exitLeaseLost, fmt.Errorf("lease on %s lost while %s ran: %w; it was stopped (exit status %d) and its work may be incomplete", what, cmd, lost, code))
	}
	if err := unlockAll(leases); err != nil {
		if errors.Is(err, locker.ErrNotHeld) || errors.Is(err, locker.ErrLeaseLost) {
			return withCode(exitLeaseLost, fmt.Errorf("lease on %s was lost before %s finished (exit status %d): its work may have overlapped another holder's", what, cmd, code))
		}
		fmt.Fprintf(e.stderr, "locker: warning: could not unlock %s (%s); it lapses within its TTL\n", what, scrub(b.explain(err).Error()))
	}
	return exitCode(code)
}

// leaseEnv is CMD's environment: LOCKER_KEY, LOCKER_OWNER and LOCKER_FENCE
// of the first key and, for several, LOCKER_KEYS and LOCKER_FENCES, one a
// line, in the order given.
func leaseEnv(leases []locker.Lease) []string {
	env := []string{
		"LOCKER_KEY=" + leases[0].Key(),
		"LOCKER_OWNER=" + leases[0].Owner(),
		"LOCKER_FENCE=" + strconv.FormatUint(leases[0].Fence(), 10),
	}
	if len(leases) > 1 {
		fences := make([]string, len(leases))
		for i, l := range leases {
			fences[i] = strconv.FormatUint(l.Fence(), 10)
		}
		env = append(env, "LOCKER_KEYS="+strings.Join(keysOf(leases), "\n"), "LOCKER_FENCES="+strings.Join(fences, "\n"))
	}
	return env
}

func keysOf(leases []locker.Lease) []string {
	keys := make([]string, len(leases))
	for i, l := range leases {
		keys[i] = l.Key()
	}
	return keys
}

// anyDone delivers the first lease to end.
func anyDone(leases []locker.Lease) <-chan locker.Lease {
	c := make(chan locker.Lease, len(leases))
	for _, l := range leases {
		go func() { <-l.Done(); c <- l }()
	}
	return c
}

// unlockAll unlocks every lease; the first error, if any.
func unlockAll(leases []locker.Lease) error {
	var first error
	for _, l := range leases {
		if err := unlock(l); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func unlock(lease locker.Lease) error {
	ctx, cancel := context.WithTimeout(context.Background(), unlockTimeout)
	defer cancel()
	return lease.Unlock(ctx)
}

func sigNum(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return int(n)
	}
	return 1
}

func sigName(s os.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	}
	return s.String()
}
