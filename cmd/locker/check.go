package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/conformance"
	"github.com/locker-go/locker/conformance/history"
)

// `locker check` runs the conformance suite's checks, conformance.Checks,
// against a live deployment, outside go test: the very checks every adapter
// passes in its tests. Each check opens its clients like separate processes
// and works on keys of its own under "locker-check/<run>/<check>/". The
// checks that need a harness's Crash or Count (which a deployment offers
// no generic way to do) are skipped, each saying so.

// invalidTTLHint follows a failure with ErrInvalidTTL: the backend refused
// the --ttl the expiry checks use.
const invalidTTLHint = " (give a --ttl this backend accepts, e.g. zk:// needs --ttl at or above the server's minimum session timeout, or the URL's session_timeout)"

func (e env) check(ctx context.Context, args []string) error {
	raw, ttl, err := e.checkArgs(args)
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
	h := conformance.Harness{
		NewLocker: func(ctx context.Context) (locker.Locker, error) {
			b, err := e.open(ctx, raw)
			if err != nil {
				return nil, err
			}
			return b.Locker, nil
		},
		TTL:    ttl,
		Prefix: "locker-check/" + strings.ToLower(rand.Text()[:8]) + "/",
	}
	return e.report(runChecks(ctx, h))
}

// checkOpts are check's flags.
type checkOpts struct {
	backend string
	ttl     time.Duration
}

// checkFlags defines check's flags on fs.
func checkFlags(fs *flag.FlagSet, f *checkOpts) {
	fs.StringVar(&f.backend, "backend", "", "backend `URL`")
	fs.DurationVar(&f.ttl, "ttl", 2*time.Second, "the short lease the expiry checks use (session backends may need more)")
}

// checkArgs parses check's arguments: the backend URL and the TTL.
func (e env) checkArgs(args []string) (raw string, ttl time.Duration, err error) {
	var f checkOpts
	fs := newFlags("check")
	checkFlags(fs, &f)
	backendFlag, ttlFlag := &f.backend, &f.ttl
	pos, err := parseInterleaved(fs, args)
	switch {
	case err != nil:
		return "", 0, err
	case len(pos) > 0:
		return "", 0, usageErrorf("check: unexpected argument %q", pos[0])
	case *ttlFlag <= 0:
		return "", 0, usageErrorf("check: --ttl must be positive")
	}
	raw, err = e.backendURL(*backendFlag)
	return raw, *ttlFlag, err
}

// checkResult is a check and, once it has run, its answer.
type checkResult struct {
	name string
	err  chan error
}

// runChecks runs the checks that must run alone (Check.Alone), one at a
// time, then starts every other check at once, each on its own keys and
// clients, and returns their results in the suite's order.
func runChecks(ctx context.Context, h conformance.Harness) []checkResult {
	checks := conformance.Checks()
	results := make([]checkResult, len(checks))
	for i, c := range checks {
		results[i] = checkResult{name: c.Name, err: make(chan error, 1)}
		if c.Alone {
			results[i].err <- c.Run(ctx, h)
		}
	}
	for i, c := range checks {
		if !c.Alone {
			go func() { results[i].err <- c.Run(ctx, h) }()
		}
	}
	return results
}

// report prints each result as soon as it is known, in order: PASS, SKIP
// with the reason, or FAIL with the error, scrubbed of credentials. It
// returns exit code 1 if any check failed.
func (e env) report(results []checkResult) error {
	failed, skipped := 0, 0
	for _, r := range results {
		err := <-r.err
		var s *conformance.SkipError
		switch {
		case err == nil:
			fmt.Fprintf(e.stdout, "PASS  %s\n", r.name)
		case errors.As(err, &s):
			skipped++
			fmt.Fprintf(e.stdout, "SKIP  %s: %s\n", r.name, scrub(s.Reason))
		default:
			failed++
			hint := ""
			if errors.Is(err, locker.ErrInvalidTTL) {
				hint = invalidTTLHint
			}
			// A check's several failures come joined, one a line: indent
			// them under the check's name.
			msg := strings.ReplaceAll(scrub(err.Error()), "\n", "\n      ")
			fmt.Fprintf(e.stdout, "FAIL  %s: %s%s\n", r.name, msg, hint)
			e.writeHistory(err)
		}
	}
	if failed > 0 {
		fmt.Fprintf(e.stdout, "%d of %d checks failed\n", failed, len(results))
		return exitCode(exitFail)
	}
	if skipped > 0 {
		fmt.Fprintf(e.stdout, "%d checks passed, %d skipped\n", len(results)-skipped, skipped)
		return nil
	}
	fmt.Fprintf(e.stdout, "all %d checks passed\n", len(results))
	return nil
}

// writeHistory writes the visualization of a history that err reports not
// linearizable to a temporary file, and says where.
func (e env) writeHistory(err error) {
	var v *history.Violation
	if !errors.As(err, &v) {
		return
	}
	f, ferr := os.CreateTemp("", "locker-history-*.html")
	if ferr == nil {
		f.Close()
		ferr = v.WriteHTML(f.Name())
	}
	if ferr != nil {
		fmt.Fprintf(e.stdout, "      history visualization: %v\n", ferr)
		return
	}
	fmt.Fprintf(e.stdout, "      history visualization: %s\n", f.Name())
}
