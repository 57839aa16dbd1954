package redsync

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// news is what a driver heard on the keys it waits for. Every master
// sends its copy of each message; news makes them count once.
//
// Two kinds of message travel on a key's channel: a release, "<id> <f>",
// the id of the record that ended and its fence (see releaseScript), and
// a take, "t<id> <ttl ms> <fence>", that a Lock which had to wait sends
// after it acquired. A take lets the other waiters, woken by the same
// release, skip the attempt they were about to make: one holder is enough
// to find the key held, and every useless attempt costs a round on all
// masters.
//
// A take is sent in the background and may arrive after its hold was
// released, however many releases ago. Fences order the two: each new
// holder's fence is above every earlier holder's, so a take whose fence
// is not above the largest fence released is stale and ignored.
type news struct {
	mu   sync.Mutex
	keys map[string]*keyNews
}

type keyNews struct {
	released      []string // ids of recent releases, newest last
	releasedFence uint64   // largest fence of a release heard
	taken         string   // id of the last take heard...
	takenFence    uint64   // ...its fence,
	takenAt       time.Time
	ttl           time.Duration // ...and its TTL
}

const takePrefix = "t"

// heard records a message and reports whether it is a release not heard
// before, which must wake the key's waiters.
func (n *news) heard(key, payload string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.keys == nil {
		n.keys = map[string]*keyNews{}
	}
	k := n.keys[key]
	if k == nil {
		k = &keyNews{}
		n.keys[key] = k
	}
	if rest, ok := strings.CutPrefix(payload, takePrefix); ok {
		f := strings.Fields(rest)
		if len(f) != 3 {
			return false
		}
		ttl, err1 := strconv.ParseInt(f[1], 10, 64)
		fence, err2 := strconv.ParseUint(f[2], 10, 64)
		if err1 == nil && err2 == nil && fence > k.releasedFence && fence > k.takenFence &&
			!slices.Contains(k.released, f[0]) {
			k.taken, k.takenFence, k.takenAt, k.ttl = f[0], fence, time.Now(), time.Duration(ttl)*time.Millisecond
		}
		return false
	}
	id, fence, _ := strings.Cut(payload, " ")
	if f, err := strconv.ParseUint(fence, 10, 64); err == nil {
		k.releasedFence = max(k.releasedFence, f) // from every copy: masters may lag
	}
	if id == "" {
		return true
	}
	if slices.Contains(k.released, id) {
		return false
	}
	if len(k.released) == 4 {
		k.released = k.released[1:]
	}
	k.released = append(k.released, id)
	return true
}

// announced reports whether the release of the hold with id was heard.
func (n *news) announced(key, id string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := n.keys[key]
	return k != nil && slices.Contains(k.released, id)
}

// takenSince reports whether another waiter took key after since and has
// not released it yet, and with which TTL.
func (n *news) takenSince(key string, since time.Time) (time.Duration, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := n.keys[key]
	if k == nil || k.taken == "" || k.takenAt.Before(since) ||
		k.takenFence <= k.releasedFence || slices.Contains(k.released, k.taken) {
		return 0, false
	}
	return k.ttl, true
}

// forget drops key's memory once nobody here waits for it.
func (n *news) forget(key string) {
	n.mu.Lock()
	delete(n.keys, key)
	n.mu.Unlock()
}

// takePayload is the take message of the hold id with ttl and fence.
func takePayload(id string, ttl time.Duration, fence uint64) string {
	return takePrefix + id + " " + strconv.FormatInt(ttl.Milliseconds(), 10) + " " + strconv.FormatUint(fence, 10)
}

// announceTake tells the other waiters for key that the hold id took it,
// in the background: it is a hint that saves them work, never needed for
// correctness, so the Lock that took the key does not wait for it.
func (d *redlock) announceTake(key, id string, ttl time.Duration, fence uint64) {
	payload := takePayload(id, ttl, fence)
	channel := d.channel(key)
	go each(context.Background(), d, d.nodeTimeout(ttl), func(ctx context.Context, _ int, c goredis.UniversalClient) (struct{}, error) {
		return struct{}{}, c.Publish(ctx, channel, payload).Err()
	})
}
