package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/locker-go/locker"
)

// Exit codes, from sysexits(3) where one fits.
const (
	exitFail        = 1  // a check failed; status/unlock of a key nobody holds
	exitUsage       = 64 // EX_USAGE: bad flags, arguments, URL, key or TTL
	exitUnavailable = 69 // EX_UNAVAILABLE: the backend could not be reached
	exitLeaseLost   = 70 // the lease was lost while CMD ran
	exitTempFail    = 75 // EX_TEMPFAIL: key held (--try) or --wait ran out
	exitCannotExec  = 126
	exitNotFound    = 127
)

// exitCode is an error that only carries an exit status: its message, if
// any, was printed already (e.g. CMD's own exit code).
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("exit status %d", int(c)) }

// usageError is a mistake in the command line.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return usageError{fmt.Sprintf(format, args...)}
}

// codedError is an error with a chosen exit code.
type codedError struct {
	code int
	err  error
}

func (e codedError) Error() string { return e.err.Error() }
func (e codedError) Unwrap() error { return e.err }

func withCode(code int, err error) error { return codedError{code, err} }

// exitCodeOf maps an error to its exit code.
func exitCodeOf(err error) int {
	var ce codedError
	var ue usageError
	switch {
	case errors.As(err, &ce):
		return ce.code
	case errors.As(err, &ue),
		errors.Is(err, locker.ErrUnknownScheme), errors.Is(err, locker.ErrInvalidURL),
		errors.Is(err, locker.ErrInvalidKey), errors.Is(err, locker.ErrInvalidTTL),
		errors.Is(err, locker.ErrInvalidOwner), errors.Is(err, locker.ErrInvalidOption):
		return exitUsage
	case errors.Is(err, locker.ErrUnavailable):
		return exitUnavailable
	case errors.Is(err, locker.ErrLeaseLost):
		return exitLeaseLost
	case errors.Is(err, locker.ErrLocked), errors.Is(err, context.DeadlineExceeded):
		return exitTempFail
	default:
		return exitFail
	}
}
