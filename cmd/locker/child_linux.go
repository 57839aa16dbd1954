package main

import "syscall"

// setDeathSignal has the kernel SIGTERM CMD if locker dies without a chance
// to stop it (SIGKILL, OOM): its lock lapses, so CMD must not go on.
func setDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGTERM }
