package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/locker-go/locker"
)

// verb is one of locker's commands. It parses its own arguments, as it
// always has (`locker run KEY CMD -x` hands -x to CMD), so cobra leaves
// them alone (DisableFlagParsing); its flags are declared to cobra as
// well, from the same definitions, for --help and shell completion.
type verb struct {
	use, short, long, example string
	flags                     func(fs *flag.FlagSet) // defines the verb's flags
	run                       func(ctx context.Context, args []string) error
}

// command is the CLI: help and usage errors by cobra's conventions, help
// on stdout with exit 0, `--version`, and `completion bash|zsh|fish`.
func (e env) command(ctx context.Context) *cobra.Command {
	root := &cobra.Command{
		Use:           "locker",
		Short:         "Distributed locks from the shell, on Redis, Redlock, ZooKeeper, etcd and SQL",
		Long:          rootHelp(),
		Version:       version(),
		SilenceErrors: true, // exit prints them, scrubbed of credentials
		SilenceUsage:  true,
	}
	root.RunE = func(c *cobra.Command, _ []string) error { // no command: a usage error, help on stderr
		c.SetOut(e.stderr)
		_ = c.Help()
		return ranError{exitCode(exitUsage)}
	}
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	root.SetVersionTemplate("locker {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErrorf("%v", err) })
	for _, v := range e.verbs() {
		root.AddCommand(verbCommand(ctx, v))
	}
	migrate := &cobra.Command{Use: "migrate", Short: "Check a move between backends (see README, Moving between backends)"}
	migrate.AddCommand(verbCommand(ctx, verb{
		use: "check --from URL --to URL [--json] [PREFIX]", short: "Report the locks held on the old side only (exit 1 while there are any)",
		flags: func(fs *flag.FlagSet) { migrateFlags(fs, new(migrateOpts)) },
		run: func(ctx context.Context, args []string) error {
			return e.migrate(ctx, append([]string{"check"}, args...))
		},
	}))
	root.AddCommand(migrate)
	return root
}

// verbCommand is v as a cobra command.
func verbCommand(ctx context.Context, v verb) *cobra.Command {
	c := &cobra.Command{
		Use: v.use, Short: v.short, Long: v.long, Example: v.example,
		DisableFlagParsing: true,
		RunE: func(c *cobra.Command, args []string) error {
			err := v.run(ctx, args)
			switch {
			case err == nil:
				return nil
			case errors.Is(err, flag.ErrHelp):
				return c.Help()
			}
			return ranError{err}
		},
	}
	fs := newFlags(c.Name())
	v.flags(fs)
	c.Flags().AddGoFlagSet(fs)
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if f.DefValue == "0s" { // a zero duration, which pflag does not know for one from package flag
			f.DefValue = "0"
		}
	})
	return c
}

// ranError is a verb's own outcome, which keeps its exit code; any other
// error cobra returns is a mistake in the command line.
type ranError struct{ err error }

func (r ranError) Error() string { return r.err.Error() }
func (r ranError) Unwrap() error { return r.err }

// verbs are locker's commands but migrate.
func (e env) verbs() []verb {
	admin := func(define func(*flag.FlagSet, *adminOpts)) func(*flag.FlagSet) {
		return func(fs *flag.FlagSet) { define(fs, new(adminOpts)) }
	}
	return []verb{{
		use:   "run [flags] KEY [KEY...] -- CMD [ARGS...]",
		short: "Hold KEYs (all or none) while CMD runs; stop CMD if the lease is lost",
		long: `Run takes the keys, all or none, keeps them alive while CMD runs, and
releases them when it exits, passing on CMD's exit code. If the lease is
lost meanwhile, CMD is stopped (SIGTERM, then SIGKILL after --grace) and
locker exits 70. CMD sees LOCKER_FENCE (the lease's fence token) and
LOCKER_KEY. Without "--", flags end at KEY and the command follows it.`,
		example: `  locker run nightly-report -- ./report.sh
  locker run --wait 30s --ttl 1m db/migrate -- make migrate
  locker run -c 'pg_dump app > app.sql' backups/app`,
		flags: func(fs *flag.FlagSet) { runFlags(fs, new(runOpts)) },
		run:   e.run,
	}, {
		use:   "elect [flags] NAME -- CMD [ARGS...]",
		short: "Run CMD while this process leads the election NAME; campaign again when leadership is lost",
		long: `Elect campaigns for NAME and runs CMD while it leads, as run does with a
key: CMD sees LOCKER_FENCE, the term (higher for every new leader, for
downstream writes to check). If leadership is lost, CMD is stopped (SIGTERM,
then SIGKILL after --grace) and locker campaigns again, unless --once
(then it exits 70). CMD exiting by itself resigns, and locker exits with
its code. Election names are apart from keys: "locker run NAME" does not
meet them.`,
		example: `  locker elect scheduler -- ./scheduler
  locker elect --label "$(hostname):8080" --ttl 10s api/leader -- ./serve --primary`,
		flags: func(fs *flag.FlagSet) { electFlags(fs, new(electOpts)) },
		run:   e.elect,
	}, {
		use: "observe [flags] NAME", short: "Print the leader of the election NAME, then each change, until interrupted",
		flags: admin(observeFlags), run: e.observe,
	}, {
		use: "status [flags] KEY", short: "Show who holds KEY (exit 1 if nobody does)",
		flags: admin(statusFlags), run: e.status,
	}, {
		use: "list [flags] [PREFIX]", short: "List the held locks whose keys begin with PREFIX",
		flags: admin(listFlags), run: e.list,
	}, {
		use: "unlock --force [flags] KEY", short: "Release KEY whoever holds it (its holders' leases are lost)",
		flags: admin(unlockFlags), run: e.unlock,
	}, {
		use: "bench [flags]", short: "Measure lock+unlock latency and contended throughput of backends side by side",
		example: `  locker bench --backend redis://localhost:6379 --backend postgres://user:pw@localhost/db --shared
  locker bench --leases 10000 --ttl 15s`,
		flags: func(fs *flag.FlagSet) { benchFlags(fs, new(benchOpts)) },
		run:   e.bench,
	}, {
		use: "check [flags]", short: "Run the conformance checks against a backend",
		flags: func(fs *flag.FlagSet) { checkFlags(fs, new(checkOpts)) },
		run:   e.check,
	}}
}

// rootHelp is locker's own help: where the backend comes from, and what
// its exit codes mean.
func rootHelp() string {
	return `locker holds distributed locks from the shell, and compares lock backends.

The backend is --backend URL, else $LOCKER_BACKEND, else SQLite at
$XDG_STATE_HOME/locker/locker.db (~/.local/state/locker/locker.db): locker
run works with no server at all. Schemes: ` + strings.Join(locker.Schemes(), ", ") + `.

Exit codes: 0 success (run: CMD's own code), 1 a failed check or a key
not held (status, unlock), 64 usage, 69 backend unavailable, 70 lease
lost while CMD ran, 75 key held (--try, --wait 0) or --wait ran out,
126/127 CMD could not be run, 128+N locker interrupted by signal N while
waiting.`
}

// version is the module's version and the VCS revision it was built from.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	v := bi.Main.Version
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value[:min(len(s.Value), 12)]
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev != "" {
		v += fmt.Sprintf(" (%s%s)", rev, dirty)
	}
	return v
}
