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

// news is what a Locker heard on the keys it waits for. Every master
// sends its copy of each message; news makes them count once.
//
// Two kinds of message travel on a key's channel: a release, whose
// payload is the id of the hold that ended (see releaseScript), and a
// take, "t<id> <ttl ms>", that a Lock which had to wait sends after it
// acquired. A take lets the other waiters, woken by the same release,
// skip the attempt they were about to make: one holder is enough to find
// the key held, and every useless attempt costs a round on all masters.
type news struct {
	mu   sync.Mutex
	keys map[string]*keyNews
}

type keyNews struct {
	released []string // ids of recent releases, newest last
	taken    string   // id of the last take heard...
	takenAt  time.Time
	ttl      time.Duration // ...and its TTL
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
		id, ms, _ := strings.Cut(rest, " ")
		ttl, err := strconv.ParseInt(ms, 10, 64)
		if err == nil && !slices.Contains(k.released, id) && id != k.taken {
			k.taken, k.takenAt, k.ttl = id, time.Now(), time.Duration(ttl)*time.Millisecond
		}
		return false
	}
	if payload == "" {
		return true
	}
	if slices.Contains(k.released, payload) {
		return false
	}
	if len(k.released) == 4 {
		k.released = k.released[1:]
	}
	k.released = append(k.released, payload)
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
	if k == nil || k.taken == "" || k.takenAt.Before(since) || slices.Contains(k.released, k.taken) {
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

// announceTake tells the other waiters for key that the hold id took it,
// in the background: it is a hint that saves them work, never needed for
// correctness, so the Lock that took the key does not wait for it.
func (l *Locker) announceTake(key, id string, ttl time.Duration) {
	payload := takePrefix + id + " " + strconv.FormatInt(ttl.Milliseconds(), 10)
	channel := l.channel(key)
	go each(context.Background(), l, l.cfg.nodeTimeout, func(ctx context.Context, _ int, c goredis.UniversalClient) (struct{}, error) {
		return struct{}{}, c.Publish(ctx, channel, payload).Err()
	})
}
