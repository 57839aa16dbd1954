package conformance

import (
	"context"
	"crypto/rand"
	"strings"
	"time"

	"github.com/locker-go/locker"
)

// Harness is how the suite drives one backend. Only NewLocker is required:
// a check that needs an optional field the harness leaves nil is skipped,
// naming what it lacked, or, where the rest stays meaningful, leaves out
// just the part that needed it (see Count).
type Harness struct {
	// NewLocker returns a new, independent client of the backend under
	// test: its own connection or session, like a separate process. The
	// suite closes every Locker it made when the check that made it ends.
	NewLocker func(ctx context.Context) (locker.Locker, error)
	// Crash makes l vanish as a killed process would: no unlock, no
	// goodbye to the backend, its keep-alive silenced (e.g. its connection
	// cut by a faultproxy.Crasher). Its locks must then lapse by
	// themselves. Optional: without it ExpiryAfterCrash is skipped.
	Crash func(ctx context.Context, l locker.Locker) error
	// Hang makes l's backend stop answering while its connections stay
	// open, as a network that drops packets does (a faultproxy.Crasher's
	// Blackhole), until heal is called. Optional: without it
	// DoneByDeadlineWhileHung is skipped.
	Hang func(ctx context.Context, l locker.Locker) (heal func(), err error)
	// Slow adds d of latency each way to l's traffic until heal is called
	// (a faultproxy.Crasher's Delay). Optional: without it
	// FaultsUnderContention leaves out its slow-network phase.
	Slow func(ctx context.Context, l locker.Locker, d time.Duration) (heal func(), err error)
	// Count returns how many per-key records the backend holds (keys,
	// nodes, rows: holders and queued waiters) for keys beginning with
	// prefix. Optional: without it NoLeak and FIFO are skipped, and
	// Cancellation and InvalidInput leave out their count of records left
	// behind (they check the rest), as Handoff does its wait for the waiter
	// to queue.
	Count func(ctx context.Context, prefix string) (int, error)
	// FIFO declares that waiters get a key in arrival order, for the FIFO
	// check to verify (with Count, to see each waiter queue).
	FIFO bool
	// TTL is the short lease the expiry checks use (default 1s); session
	// backends set what their session timeout bounds allow.
	TTL time.Duration
	// RoundTrip makes one plain backend round trip (PING, SELECT 1, a Get).
	// Optional: benchmarks report lock+unlock as a multiple of it.
	RoundTrip func(ctx context.Context) error
	// Log, if set, receives what the checks measured on the way (how late
	// a cut-off holder's Done closed, how soon the key passed on after a
	// fault): the figures behind a guarantee. Run sets it to t.Logf.
	Log func(format string, args ...any)
	// NoModes declares a driver that keeps no modes (no
	// driver.ModeKeeper), as a third party's may: its shared leases are
	// exclusive and a subtree lock takes its whole top-level tree. The
	// checks that shared leases share, and that subtree locks on unrelated
	// paths are independent, are then skipped; those that they exclude
	// what they must still run.
	NoModes bool
	// Contenders is how many contend for one Limit key in LimitContention
	// (default 50). A harness may ask for fewer where the run itself
	// cannot carry 50 (Redlock through proxies under the race detector:
	// its masters' replies then miss their timeout), as long as a run
	// elsewhere checks 50.
	Contenders int
	// Prefix begins every key the checks and benchmarks use; each check
	// adds its name, so checks never share a key. It must be unique to the
	// run when runs may overlap on one backend. Run defaults it from the
	// test's name; elsewhere the default is "conformance-<random>/", random
	// per process.
	Prefix string
}

func (h Harness) ttl() time.Duration {
	if h.TTL > 0 {
		return h.TTL
	}
	return time.Second
}

func (h Harness) contenders() int {
	if h.Contenders > 0 {
		return h.Contenders
	}
	return 50
}

func (h Harness) prefix() string {
	if h.Prefix != "" {
		return h.Prefix
	}
	return "conformance-" + runID + "/"
}

// slack is the grace the suite allows on top of a TTL for the backend and a
// loaded CI machine; it catches "never" and "after a poll interval", not
// milliseconds.
const slack = 3 * time.Second

// runID keeps keys (and owners) of concurrent runs against one backend apart.
var runID = strings.ToLower(rand.Text()[:8])
