//go:build !linux

package main

import "syscall"

// setDeathSignal: only Linux has a parent-death signal; elsewhere a killed
// locker leaves CMD running after its lock lapses.
func setDeathSignal(*syscall.SysProcAttr) {}
