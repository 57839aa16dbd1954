// Command locker holds distributed locks from the shell and compares lock
// backends.
//
//	locker run [--backend URL] [--ttl D] [--wait D | --try] KEY -- CMD [ARGS...]
//	locker status KEY | list [PREFIX] | unlock --force KEY
//	locker bench --backend URL [--backend URL ...] [--workers N] [--ops N] [--hold D]
//	locker check --backend URL
//	locker migrate check --from URL --to URL [--json] [PREFIX]
//
// The backend is a URL chosen by --backend, else $LOCKER_BACKEND, else the
// embedded default: a SQLite file under $XDG_STATE_HOME/locker, so `locker
// run` works with no server at all. Every adapter of this module is linked in.
//
// `locker run` holds KEY with keep-alive while CMD runs, and stops CMD
// (SIGTERM, then SIGKILL after --grace) if the lease is lost: from then on
// CMD's work would no longer be protected. CMD runs in its own process
// group, so signals locker forwards reach its whole tree exactly once, and
// locker itself always lives to unlock.
//
// URLs never appear with their credentials in any output: errors, also those
// of backend drivers, are scrubbed before they are printed.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/locker-go/locker"
)

const usage = `usage:
  locker run [--backend URL] [--ttl D] [--wait D | --try] [--grace D] [--shared] [--subtree] KEY [KEY...] -- CMD [ARGS...]
  locker status [--backend URL] [--subtree] KEY
  locker list [--backend URL] [PREFIX]
  locker unlock --force [--backend URL] [--subtree] KEY
  locker bench [--backend URL ...] [--workers N] [--keys N] [--ops N] [--hold D] [--shared] [--json] [--plot FILE]
  locker check [--backend URL] [--ttl D]
  locker migrate check --from URL --to URL [--json] [PREFIX]

The backend is --backend, else $LOCKER_BACKEND, else SQLite at
$XDG_STATE_HOME/locker/locker.db (~/.local/state/locker/locker.db).
Schemes: %s.

Exit codes: 0 success (run: CMD's own code), 1 a failed check or a key
not held (status, unlock), 64 usage, 69 backend unavailable, 70 lease
lost while CMD ran, 75 key held (--try) or --wait ran out, 126/127 CMD
could not be run, 128+N locker interrupted by signal N while waiting.
`

// env is what a command reads from its surroundings; tests of the pure
// parts can fill it without touching the process.
type env struct {
	stdout, stderr io.Writer
	getenv         func(string) string
}

func main() {
	e := env{stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}
	os.Exit(e.main(context.Background(), os.Args[1:]))
}

func (e env) main(ctx context.Context, args []string) int {
	if len(args) == 0 {
		e.usage()
		return exitUsage
	}
	cmd, args := args[0], args[1:]
	var err error
	switch cmd {
	case "run":
		err = e.run(ctx, args)
	case "status":
		err = e.status(ctx, args)
	case "list":
		err = e.list(ctx, args)
	case "unlock":
		err = e.unlock(ctx, args)
	case "bench":
		err = e.bench(ctx, args)
	case "check":
		err = e.check(ctx, args)
	case "migrate":
		err = e.migrate(ctx, args)
	case "help", "-h", "-help", "--help":
		e.usage()
		return 0
	default:
		err = usageErrorf("unknown command %q", cmd)
	}
	return e.exit(err)
}

func (e env) usage() {
	fmt.Fprintf(e.stderr, usage, strings.Join(locker.Schemes(), ", "))
}

// exit prints err (scrubbed of credentials) and returns its exit code.
func (e env) exit(err error) int {
	if err == nil {
		return 0
	}
	var code exitCode
	if errors.As(err, &code) {
		return int(code) // the message, if any, was printed already
	}
	// Errors of package locker begin with "locker: " already.
	fmt.Fprintln(e.stderr, "locker: "+strings.TrimPrefix(scrub(err.Error()), "locker: "))
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintln(e.stderr, "run 'locker help' for usage")
	}
	return exitCodeOf(err)
}
