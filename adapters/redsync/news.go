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

// news is what a driver heard on the keys it waits for, each message once
// however many masters sent it: releases, "<id> <fence>" (the id of the
// record that ended), and takes, "t<id> <ttl ms> <fence>", which a Lock
// that had to wait sends once it acquired, so that the other waiters woken
// by the same release skip an attempt bound to fail. A take may arrive
// after its hold's release; a take whose fence is not above every fence
// released is stale and ignored.
type news struct {
	mu   sync.Mutex
	keys map[string]*keyNews // the keys waited for here
}

type keyNews struct {
	released      []string // ids of recent releases, newest last
	releasedFence uint64   // largest fence released
	taken         string   // the last take: id, fence, when heard, TTL
	takenFence    uint64
	takenAt       time.Time
	ttl           time.Duration
}

const takePrefix = "t"

// watch starts recording what is heard of key; forget ends it.
func (n *news) watch(key string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.keys[key] == nil {
		n.keys[key] = &keyNews{}
	}
}

func (n *news) forget(key string) {
	n.mu.Lock()
	delete(n.keys, key)
	n.mu.Unlock()
}

// heard records a message and reports whether it is a release not heard
// before, which must wake the key's waiters.
func (n *news) heard(key, payload string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := n.keys[key]
	if k == nil {
		return false
	}
	if rest, ok := strings.CutPrefix(payload, takePrefix); ok {
		f := strings.Fields(rest)
		if len(f) != 3 {
			return false
		}
		ttl, err1 := strconv.ParseInt(f[1], 10, 64)
		fence, err2 := strconv.ParseUint(f[2], 10, 64)
		if err1 == nil && err2 == nil && fence > max(k.releasedFence, k.takenFence) && !slices.Contains(k.released, f[0]) {
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
	k.released = append(k.released[max(len(k.released)-3, 0):], id) // the last 4
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

// takePayload is the take message of the hold id with ttl and fence.
func takePayload(id string, ttl time.Duration, fence uint64) string {
	return takePrefix + id + " " + strconv.FormatInt(ttl.Milliseconds(), 10) + " " + strconv.FormatUint(fence, 10)
}

// announceTake tells the other waiters that the hold id took key, in the
// background: a hint that saves work, never needed for correctness.
func (d *redlock) announceTake(key, id string, ttl time.Duration, fence uint64) {
	payload, channel := takePayload(id, ttl, fence), d.channel(key)
	go each(context.Background(), d, d.nodeTimeout(ttl), func(ctx context.Context, _ int, c goredis.UniversalClient) (struct{}, error) {
		return struct{}{}, c.Publish(ctx, channel, payload).Err()
	})
}
