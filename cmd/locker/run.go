package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
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

func (e env) run(ctx context.Context, args []string) error {
	fs := newFlags("run")
	backendFlag := fs.String("backend", "", "backend URL")
	ttl := fs.Duration("ttl", locker.DefaultTTL, "lease length; renewed every TTL/3 while CMD runs")
	wait := fs.Duration("wait", 0, "give up after waiting this long (default: wait as long as it takes)")
	try := fs.Bool("try", false, "fail at once if the key is held")
	grace := fs.Duration("grace", 10*time.Second, "after SIGTERM on lease loss, SIGKILL CMD if it still runs")

	var key string
	var cmdArgs []string
	if before, after, dashed := splitCommand(args); dashed {
		pos, err := parseInterleaved(fs, before)
		if err != nil {
			return err
		}
		if len(pos) != 1 {
			return usageErrorf("run: want one KEY before --, got %d arguments", len(pos))
		}
		key, cmdArgs = pos[0], after
	} else {
		if err := fs.Parse(args); err != nil {
			return usageErrorf("run: %v", err)
		}
		if fs.NArg() > 0 {
			key, cmdArgs = fs.Arg(0), fs.Args()[1:]
		}
	}
	switch {
	case key == "" && len(cmdArgs) == 0:
		return usageErrorf("run: want KEY -- CMD [ARGS...]")
	case len(cmdArgs) == 0:
		return usageErrorf("run: no command to run: locker run KEY -- CMD [ARGS...]")
	case *try && *wait != 0:
		return usageErrorf("run: --try and --wait exclude each other")
	case *wait < 0 || *grace < 0:
		return usageErrorf("run: --wait and --grace must not be negative")
	}
	opts := []locker.Option{locker.WithTTL(*ttl)}
	if _, err := locker.Resolve(key, opts...); err != nil {
		return err // bad key or TTL: fail before touching the backend
	}

	// Catch signals before anything else, so locker lives to unlock.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)

	lease, b, err := e.acquire(ctx, sigs, *backendFlag, key, *try, *wait, opts)
	if err != nil {
		return err
	}
	defer b.Close()
	return e.supervise(b, lease, cmdArgs, sigs, *grace)
}

// acquire opens the backend and takes key; a signal meanwhile abandons it.
func (e env) acquire(ctx context.Context, sigs <-chan os.Signal, backendFlag, key string,
	try bool, wait time.Duration, opts []locker.Option) (locker.Lease, *backend, error) {
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
	lease, b, err := e.take(actx, backendFlag, key, try, wait, opts)
	close(stop)
	if s, ok := <-watched; ok { // interrupted, even if the lock came through
		if lease != nil {
			_ = unlock(lease)
		}
		if b != nil {
			b.Close()
		}
		fmt.Fprintf(e.stderr, "locker: interrupted by %s while waiting for %q; nothing is held\n", sigName(s), key)
		return nil, nil, exitCode(128 + sigNum(s))
	}
	return lease, b, err
}

func (e env) take(ctx context.Context, backendFlag, key string, try bool, wait time.Duration,
	opts []locker.Option) (locker.Lease, *backend, error) {
	raw, err := e.backendURL(backendFlag)
	if err != nil {
		return nil, nil, err
	}
	b, err := e.open(ctx, raw)
	if err != nil {
		return nil, nil, err
	}
	var lease locker.Lease
	switch {
	case try:
		lease, err = b.TryLock(ctx, key, opts...)
		if errors.Is(err, locker.ErrLocked) {
			err = withCode(exitTempFail, fmt.Errorf("%q is held by another owner%s; not waiting (--try)", key, holderOf(ctx, b, key)))
		}
	case wait > 0:
		wctx, cancel := context.WithTimeout(ctx, wait)
		lease, err = b.Lock(wctx, key, opts...)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = withCode(exitTempFail, fmt.Errorf("%q is still held after waiting %v (--wait)%s", key, wait, holderOf(ctx, b, key)))
		}
	default:
		lease, err = b.Lock(ctx, key, opts...)
	}
	if err != nil {
		b.Close()
		return nil, nil, b.explain(err)
	}
	return lease, b, nil
}

// holderOf describes who holds key, for messages; best effort.
func holderOf(ctx context.Context, b *backend, key string) string {
	adm, ok := b.Locker.(locker.Admin)
	if !ok {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	info, err := adm.Status(ctx, key)
	if err != nil {
		return ""
	}
	s := fmt.Sprintf(" (owner %s, fence %d", info.Owner, info.Fence)
	if !info.Expires.IsZero() {
		s += fmt.Sprintf(", expires in %v", time.Until(info.Expires).Round(time.Millisecond))
	}
	return s + ")"
}

// supervise runs CMD while the lease is held and returns its exit code.
func (e env) supervise(b *backend, lease locker.Lease, cmdArgs []string, sigs <-chan os.Signal, grace time.Duration) error {
	key := lease.Key()
	c, err := startChild(cmdArgs, []string{
		"LOCKER_KEY=" + key,
		"LOCKER_OWNER=" + lease.Owner(),
		"LOCKER_FENCE=" + strconv.FormatUint(lease.Fence(), 10),
	})
	if err != nil {
		unlock(lease)
		return err
	}
	var (
		leaseDone = lease.Done()
		lost      error
		kill      <-chan time.Time
	)
	for running := true; running; {
		select {
		case <-c.done:
			running = false
		case <-leaseDone:
			leaseDone = nil
			lost = lease.Err()
			if lost == nil {
				lost = locker.ErrLeaseLost
			}
			fmt.Fprintf(e.stderr, "locker: lost the lease on %q (%s): stopping %s with SIGTERM\n", key, scrub(lost.Error()), cmdArgs[0])
			c.signal(syscall.SIGTERM)
			kill = time.After(grace)
		case <-kill:
			fmt.Fprintf(e.stderr, "locker: %s still runs %v after SIGTERM: sending SIGKILL\n", cmdArgs[0], grace)
			c.signal(syscall.SIGKILL)
		case s := <-sigs:
			c.signal(s) // CMD decides what the signal means; its exit ends locker
		}
	}
	c.restoreTerminal()
	code := c.exitCode()
	if lost != nil {
		_ = lease.Unlock(context.Background()) // frees local resources; the key is gone already
		return withCode(exitLeaseLost, fmt.Errorf("lease on %q lost while %s ran: %w; it was stopped (exit status %d) and its work may be incomplete", key, cmdArgs[0], lost, code))
	}
	if err := unlock(lease); err != nil {
		if errors.Is(err, locker.ErrNotHeld) || errors.Is(err, locker.ErrLeaseLost) {
			return withCode(exitLeaseLost, fmt.Errorf("lease on %q was lost before %s finished (exit status %d): its work may have overlapped another holder's", key, cmdArgs[0], code))
		}
		fmt.Fprintf(e.stderr, "locker: warning: could not unlock %q (%s); it lapses within its TTL\n", key, scrub(b.explain(err).Error()))
	}
	return exitCode(code)
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
