package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/locker-go/locker/internal/servers"
)

// up starts every server not answering yet, all before waiting for any, so
// they boot side by side; then waits for each and makes each backend ready.
func (e *env) up(bs []*backend) error {
	began := time.Now()
	if err := ensurePackages(bs); err != nil {
		return err
	}
	exited := map[*server]<-chan struct{}{}
	for _, b := range bs {
		if b.err != nil {
			return fmt.Errorf("%s: %w", b.name, b.err)
		}
		for _, s := range b.servers {
			if err := os.MkdirAll(filepath.Dir(s.log), 0o755); err != nil {
				return err
			}
			ch, err := s.start()
			if err != nil {
				return err
			}
			exited[s] = ch
		}
	}
	for _, b := range bs {
		if err := b.await(e, exited); err != nil {
			return err
		}
	}
	logf("all up (%d ms)", time.Since(began).Milliseconds())
	e.status(bs)
	return nil
}

// await waits until b's servers answer as started, makes b ready, and waits
// until they serve the tests: each step within e's time for one server.
func (b *backend) await(e *env, exited map[*server]<-chan struct{}) error {
	within := func(f func(ctx context.Context) error) error {
		ctx, cancel := e.within()
		defer cancel()
		return f(ctx)
	}
	for _, s := range b.servers {
		if s.started != nil && probe(s.answers) != nil {
			if err := within(func(ctx context.Context) error { return s.await(ctx, s.started, exited[s]) }); err != nil {
				return err
			}
		}
	}
	if b.ready != nil {
		if err := within(b.ready); err != nil {
			return fmt.Errorf("%s: %w", b.name, err)
		}
	}
	for _, s := range b.servers {
		if err := within(func(ctx context.Context) error { return s.await(ctx, s.answers, exited[s]) }); err != nil {
			return err
		}
	}
	return nil
}

// probe is servers.Probe of check, on its own.
func probe(check servers.Check) error { return servers.Probe(context.Background(), check) }

// down stops the servers this command started; one that still answers was
// started by someone else (docker compose?) and is left alone.
func (e *env) down(bs []*backend) error {
	var errs []error
	for _, b := range bs {
		for _, s := range b.servers {
			errs = append(errs, s.stop(e.timeout))
		}
	}
	for _, b := range bs {
		if up, _ := b.up(); up {
			logf("%s still answers: not started by scripts/backends (docker compose?); left alone", b.name)
		}
	}
	return errors.Join(errs...)
}

// status prints a line per backend and reports whether all answer.
func (e *env) status(bs []*backend) bool {
	ok := true
	for _, b := range bs {
		up, detail := b.up()
		state := "up"
		if !up {
			state, ok = "down", false
		}
		fmt.Printf("%-12s %-5s %-22s %s\n", b.name, state, b.addr, detail)
	}
	return ok
}

// up reports whether every server of b answers, and a detail for status.
func (b *backend) up() (bool, string) {
	var down []string
	for _, s := range b.servers {
		if probe(s.answers) != nil {
			down = append(down, s.label[strings.LastIndexByte(s.label, ':')+1:])
		}
	}
	var detail []string
	if len(b.servers) > 1 {
		n := len(b.servers)
		detail = append(detail, fmt.Sprintf("%d/%d %s", n-len(down), n, b.noun))
		if len(down) > 0 {
			detail = append(detail, "down: "+strings.Join(down, " "))
		}
	} else if pid, ok := b.servers[0].pid(); ok {
		detail = append(detail, fmt.Sprintf("pid %d", pid))
	}
	if len(detail) == 0 {
		return len(down) == 0, ""
	}
	return len(down) == 0, "(" + strings.Join(detail, "; ") + ")"
}

// locked runs f holding the state directory's lock, so that two commands
// (two test runs) do not start the same servers at once.
func (e *env) locked(f func() error) error {
	lock, err := os.OpenFile(filepath.Join(e.state, ".lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close() // and with it the lock
	for deadline := time.Now().Add(10 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			return fmt.Errorf("another scripts/backends holds %s: %w", lock.Name(), err)
		}
	}
	return f()
}
