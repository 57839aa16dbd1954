package sql

import "github.com/locker-go/locker"

// Crash makes l vanish without unlocking, as a killed process would.
func Crash(l locker.Locker) { l.(*sqlLocker).crash() }
