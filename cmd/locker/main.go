// Command locker holds distributed locks from the shell and compares lock
// backends.
//
//	locker run [--backend URL] [--ttl D] [--wait D | --try] [-c SHELLCMD] KEY -- CMD [ARGS...]
//	locker status [--json] KEY | list [--json] [PREFIX] | unlock --force KEY
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
	"log/slog"
	"os"
	"strings"
)

// env is what a command reads from its surroundings; tests of the pure
// parts can fill it without touching the process.
type env struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	logger         *slog.Logger // run -v: the Locker's rare events, to stderr
}

func main() {
	e := env{stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}
	os.Exit(e.main(context.Background(), os.Args[1:]))
}

func (e env) main(ctx context.Context, args []string) int {
	root := e.command(ctx)
	root.SetArgs(args)
	err := root.Execute()
	var ran ranError
	if errors.As(err, &ran) {
		return e.exit(ran.err)
	}
	if err != nil { // cobra's: an unknown command or flag
		return e.exit(usageErrorf("%v", err))
	}
	return 0
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
		fmt.Fprintln(e.stderr, "run 'locker --help' for usage")
	}
	return exitCodeOf(err)
}
