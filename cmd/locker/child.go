package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/mattn/go-isatty"
	"golang.org/x/sys/unix"
)

// child is CMD, run in a process group of its own: signals locker forwards
// (or sends on lease loss) reach every process CMD started, exactly once,
// and a Ctrl-C at the terminal never kills locker before it unlocks.
type child struct {
	cmd   *exec.Cmd
	done  chan struct{} // closed when CMD has exited
	state *os.ProcessState
	tty   int // the terminal handed to CMD's group, or -1
}

// startChild starts CMD with extra environment variables. When locker runs
// in the foreground of a terminal, CMD's group takes the foreground, so it
// can read the terminal and gets the terminal's Ctrl-C itself; locker then
// notices its exit and unlocks.
func startChild(args, extraEnv []string) (*child, error) {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), extraEnv...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setDeathSignal(cmd.SysProcAttr)
	c := &child{cmd: cmd, done: make(chan struct{}), tty: -1}
	if fd := int(os.Stdin.Fd()); isatty.IsTerminal(uintptr(fd)) {
		if fg, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP); err == nil && fg == unix.Getpgrp() {
			cmd.SysProcAttr.Foreground, cmd.SysProcAttr.Ctty = true, fd
			c.tty = fd
		}
	}
	started := make(chan error, 1)
	go func() {
		// The death signal follows the thread that started CMD: keep that
		// thread for CMD's whole life.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait() // the exit status is in cmd.ProcessState
		c.state = cmd.ProcessState
		close(c.done)
	}()
	if err := <-started; err != nil {
		code := exitCannotExec
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			code = exitNotFound
		}
		return nil, withCode(code, fmt.Errorf("cannot run %s: %w", args[0], err))
	}
	return c, nil
}

// signal sends sig to CMD's process group.
func (c *child) signal(sig os.Signal) {
	if s, ok := sig.(syscall.Signal); ok {
		_ = syscall.Kill(-c.cmd.Process.Pid, s)
	}
}

// exitCode is CMD's exit status as a shell reports it: 128+N when signal N
// killed it.
func (c *child) exitCode() int {
	if ws, ok := c.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return c.state.ExitCode()
}

// restoreTerminal takes the terminal's foreground back from CMD's group.
func (c *child) restoreTerminal() {
	if c.tty < 0 {
		return
	}
	// A background group that sets the foreground gets SIGTTOU: ignore it
	// for the call only (an ignored signal would be inherited by children).
	signal.Ignore(syscall.SIGTTOU)
	_ = unix.IoctlSetPointerInt(c.tty, unix.TIOCSPGRP, unix.Getpgrp())
	signal.Reset(syscall.SIGTTOU)
}

// suspend is job control for CMD stopped at the terminal: locker takes the
// terminal back and stops itself, so that the shell sees its job stopped
// and gets the terminal. It returns once locker is continued (fg).
func (c *child) suspend() {
	c.restoreTerminal()
	cont := make(chan os.Signal, 1)
	signal.Notify(cont, syscall.SIGCONT)
	defer signal.Stop(cont)
	// The stop reaches this thread when the kernel gets round to it: the
	// SIGCONT that ends it, not the return of kill, says it is over.
	_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
	<-cont
}

// resume gives CMD's group the terminal again and continues it.
func (c *child) resume() {
	signal.Ignore(syscall.SIGTTOU)
	_ = unix.IoctlSetPointerInt(c.tty, unix.TIOCSPGRP, c.cmd.Process.Pid)
	signal.Reset(syscall.SIGTTOU)
	c.signal(syscall.SIGCONT)
}
