package main

import (
	"errors"
	"flag"
	"io"
	"strings"
)

// newFlags returns a flag set that reports errors as usage errors instead
// of printing and exiting.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("locker "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseInterleaved parses flags that may come before or after the
// positional arguments (`locker status KEY --backend URL`); whatever follows
// a "--" is positional. It returns the positional arguments.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	args, rest, _ := splitCommand(args)
	var pos []string
	for {
		if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
			return nil, err // the command's help, not a mistake
		} else if err != nil {
			return nil, usageErrorf("%s: %v", fs.Name(), err)
		}
		if fs.NArg() == 0 {
			return append(pos, rest...), nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// splitCommand splits `[flags] KEY -- CMD ARGS` at the first "--"; without
// one, flags end at KEY and the command follows it.
func splitCommand(args []string) (before, cmd []string, dashed bool) {
	for i, a := range args {
		if a == "--" {
			return args[:i], args[i+1:], true
		}
	}
	return args, nil, false
}

// stringsFlag is a flag that may be given several times.
type stringsFlag []string

func (s *stringsFlag) String() string     { return strings.Join(*s, ",") }
func (s *stringsFlag) Set(v string) error { *s = append(*s, v); return nil }

// isSet reports whether the flag name was given on the command line.
func isSet(fs *flag.FlagSet, name string) (set bool) {
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
