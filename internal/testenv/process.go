package testenv

import (
	"os/exec"
	"testing"
	"time"
)

// process is a server process of a test's own: started, killed as a crash
// would, and started again on its data.
type process struct {
	t    testing.TB
	name string
	cmd  *exec.Cmd
	exit chan struct{} // closed when cmd has exited
}

// spawn starts cmd and returns a channel closed when it exits.
func (p *process) spawn(cmd *exec.Cmd) <-chan struct{} {
	p.t.Helper()
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	exit := make(chan struct{})
	p.cmd, p.exit = cmd, exit
	go func() { _ = cmd.Wait(); close(exit) }()
	return exit
}

// Kill ends the server with SIGKILL, as a crash would, and waits for it.
func (p *process) Kill() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.exit
}

// restart kills the server and runs start, which starts it again and
// waits until it answers.
func (p *process) restart(start func()) {
	old, began := p.cmd.Process.Pid, time.Now()
	p.Kill()
	start()
	p.t.Logf("%s pid %d killed; pid %d answers %v later", p.name, old, p.cmd.Process.Pid, time.Since(began).Round(time.Millisecond))
}
