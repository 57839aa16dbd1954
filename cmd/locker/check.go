package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/locker-go/locker"
)

// `locker check` runs the contract's checks against a live deployment,
// outside go test. They restate the core of the conformance suite
// (conformance.Run needs a *testing.T) on keys of their own under
// "locker-check/<run>/", each with its own clients like separate processes.

// slack is the grace allowed on top of a TTL for the network and a loaded
// machine, as in the conformance suite.
const slack = 3 * time.Second

type checkCase struct {
	name string
	fn   func(ctx context.Context, c *checker) error
}

var checks = []checkCase{
	{"mutual exclusion", checkMutualExclusion},
	{"TryLock on a held key", checkTryLockHeld},
	{"opaque keys", checkOpaqueKeys},
	{"expiry without keep-alive", checkExpiry},
	{"owner-only release", checkOwnerOnlyRelease},
	{"keep-alive", checkKeepAlive},
	{"re-entry", checkReentry},
	{"cancellation", checkCancellation},
	{"handoff", checkHandoff},
	{"invalid input", checkInvalidInput},
	{"admin: status, list, force unlock", checkAdmin},
}

// checker gives one check its clients and keys.
type checker struct {
	e      env
	raw    string
	prefix string
	ttl    time.Duration

	mu      sync.Mutex
	clients []*backend
}

func (c *checker) client(ctx context.Context) (locker.Locker, error) {
	b, err := c.e.open(ctx, c.raw)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.clients = append(c.clients, b)
	c.mu.Unlock()
	return b.Locker, nil
}

func (c *checker) clientsN(ctx context.Context, n int) ([]locker.Locker, error) {
	ls := make([]locker.Locker, n)
	for i := range ls {
		var err error
		if ls[i], err = c.client(ctx); err != nil {
			return nil, err
		}
	}
	return ls, nil
}

func (c *checker) close() {
	for _, b := range c.clients {
		b.Close()
	}
}

func (e env) check(ctx context.Context, args []string) error {
	fs := newFlags("check")
	backendFlag := fs.String("backend", "", "backend URL")
	ttl := fs.Duration("ttl", 2*time.Second, "the short lease the expiry checks use (session backends may need more)")
	pos, err := parseInterleaved(fs, args)
	switch {
	case err != nil:
		return err
	case len(pos) > 0:
		return usageErrorf("check: unexpected argument %q", pos[0])
	case *ttl <= 0:
		return usageErrorf("check: --ttl must be positive")
	}
	raw, err := e.backendURL(*backendFlag)
	if err != nil {
		return err
	}
	ctx, cancel := signalContext(ctx)
	defer cancel()
	probe, err := e.open(ctx, raw) // fail once, clearly, if it is unreachable
	if err != nil {
		return err
	}
	probe.Close()
	fmt.Fprintf(e.stdout, "checking %s\n", redactURL(raw))
	run := strings.ToLower(rand.Text()[:8])
	results := make([]chan error, len(checks))
	for i, cc := range checks {
		results[i] = make(chan error, 1)
		go func() {
			c := &checker{e: e, raw: raw, prefix: "locker-check/" + run + "/" + fmt.Sprint(i) + "/", ttl: *ttl}
			defer c.close()
			cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			results[i] <- cc.fn(cctx, c)
		}()
	}
	failed := 0
	for i, cc := range checks { // in order, each as soon as it is known
		if err := <-results[i]; err != nil {
			failed++
			hint := ""
			if errors.Is(err, locker.ErrInvalidTTL) {
				hint = " (give a --ttl this backend accepts, e.g. zk:// needs --ttl at or above the server's minimum session timeout, or the URL's session_timeout)"
			}
			fmt.Fprintf(e.stdout, "FAIL  %s: %s%s\n", cc.name, scrub(err.Error()), hint)
		} else {
			fmt.Fprintf(e.stdout, "PASS  %s\n", cc.name)
		}
	}
	if failed > 0 {
		fmt.Fprintf(e.stdout, "%d of %d checks failed\n", failed, len(checks))
		return exitCode(exitFail)
	}
	fmt.Fprintf(e.stdout, "all %d checks passed\n", len(checks))
	return nil
}
