// Package servers knows how each backend's server is run: its command line,
// the files it needs before it starts, and how to tell that it answers.
//
// It is the one place for that knowledge. Two callers start servers from it:
// scripts/backends (through internal/cmd/backends), which keeps the
// long-lived servers of DESIGN.md's fixed ports, and internal/testenv, whose
// fault tests start servers of their own on free ports to kill and restart.
// A setting changed here changes both.
package servers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"time"
)

// Addr is a loopback host:port.
func Addr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// Port is addr's port.
func Port(addr string) int {
	_, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return n
}

// A Check tells whether a server answers: nil when it does.
type Check func(ctx context.Context) error

// Probe runs check once, within the 2 s a server that answers needs (and
// within ctx).
func Probe(ctx context.Context, check Check) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return check(ctx)
}

// Await runs check (a Probe) every interval until it passes, exited is closed (the
// server's process has ended: it never will), or ctx ends. exited may be nil.
func Await(ctx context.Context, check Check, exited <-chan struct{}, interval time.Duration) error {
	for {
		err := Probe(ctx, check)
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("exited before answering (last check: %w)", err)
		case <-ctx.Done():
			return fmt.Errorf("%w (last check: %w)", context.Cause(ctx), err)
		case <-time.After(interval): // a server starting up offers nothing to wait on
		}
	}
}

// look finds a server's program on PATH, naming the package that has it.
func look(program, pkg string) (string, error) {
	p, err := exec.LookPath(program)
	if err != nil {
		return "", fmt.Errorf("%s not found (Debian package %s; scripts/backends up installs it): %w", program, pkg, err)
	}
	return p, nil
}

// writeFiles writes each name → content (their directories exist).
func writeFiles(files map[string]string) error {
	var errs []error
	for name, content := range files {
		errs = append(errs, os.WriteFile(name, []byte(content), 0o644))
	}
	return errors.Join(errs...)
}
