package etcd

import (
	"crypto/rand"
	"strconv"
	"strings"
	"sync"
)

// entryNames names a Locker's queue entries: the queue's prefix, the
// Locker's random id and a number. A name whose entry this Locker deleted
// itself serves the queue's next entry, as concurrency.Mutex's one name
// per session does. etcd keeps a deleted key in its index until a
// compaction, and every range over a queue (each Lock's look at the
// entries before its own, each waiter's look after its predecessor went)
// walks those too: with a fresh name per entry, each lock taken made the
// next slower (0.4 ms more per lock+unlock for every 1,000 taken on one
// key, on an etcd that never compacts).
//
// A name is taken back only once this Locker's own txn deleted its entry.
// One whose entry ended otherwise (its etcd lease expired, ForceUnlock,
// the last hold another Locker re-entered) is not used again, and every
// txn that creates an entry also asks that no entry has its name, so a
// live entry is never overwritten.
type entryNames struct {
	id   string // this Locker's, with the separator: "<random>."
	mu   sync.Mutex
	next uint64
	free map[string][]string // by queue prefix: names whose entry is gone
	n    int                 // names in free
}

// maxFreeNames bounds the names kept for reuse (a Locker that held many
// keys once): beyond it, a name is let go, as before reuse.
const maxFreeNames = 1 << 14

func newEntryNames() *entryNames {
	return &entryNames{id: rand.Text()[:16] + ".", free: map[string][]string{}}
}

// take returns a name under queue prefix q: one given back, else a new one.
func (e *entryNames) take(q string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if names := e.free[q]; len(names) > 0 {
		name := names[len(names)-1]
		if len(names) == 1 {
			delete(e.free, q)
		} else {
			e.free[q] = names[:len(names)-1]
		}
		e.n--
		return name
	}
	e.next++
	return q + e.id + strconv.FormatUint(e.next, 36)
}

// give takes back name, whose entry this Locker's txn has just deleted.
// Another Locker's name (an entry re-entered here) is not its to give.
func (e *entryNames) give(name string) {
	i := strings.LastIndexByte(name, '/') + 1
	if !strings.HasPrefix(name[i:], e.id) {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n < maxFreeNames {
		e.free[name[:i]] = append(e.free[name[:i]], name)
		e.n++
	}
}
