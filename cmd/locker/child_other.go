//go:build !linux

package main

import "syscall"

// setDeathSignal: only Linux has a parent-death signal; elsewhere a killed
// locker leaves CMD running after its lock lapses.
func setDeathSignal(*syscall.SysProcAttr) {}

// stops: job control is Linux's only (waitid); elsewhere CMD stopped at
// the terminal stays stopped until continued from another one.
func (c *child) stops() <-chan struct{} { return nil }
