// Package otellocker adds OpenTelemetry traces and metrics to any
// locker.Locker:
//
//	l = otellocker.Wrap(l, otellocker.WithBackend("redis"))
//
// Spans: locker.Lock, locker.TryLock, locker.Unlock and locker.Refresh,
// with the backend, the mode (exclusive or shared), the fence granted and,
// only when asked (WithKeys), the key. Metrics, by backend (never by key):
//
//	locker.wait.duration     histogram, s: how long Lock and TryLock took, by outcome
//	locker.acquisitions      counter: Lock and TryLock calls, by outcome
//	                         (acquired, locked, canceled, error)
//	locker.hold.duration     histogram, s: from the grant to the lease's end, by
//	                         how it ended (unlocked, lost)
//	locker.leases.lost       counter: leases that ended lost (ErrLeaseLost)
//	locker.leases.live       up-down counter: leases held now
//
// It uses the global providers unless given others (WithTracerProvider,
// WithMeterProvider), so it costs nothing until an application installs
// one. Only the OpenTelemetry API is imported; the SDK is for its tests.
//
// The wrapper keeps locker.Admin and locker.FenceRaiser where l has them,
// and its Unwrap method returns l.
// Each lease it hands out has a goroutine that waits for its end (to time
// the hold and count a loss as it happens): a goroutine per live lease.
// locker.LockAll over a wrapped Locker takes the keys one by one, in
// sorted order.
package otellocker
