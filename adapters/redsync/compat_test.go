package redsync

import (
	"context"
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/rediskey"
)

// The previous version's acquire and release scripts, verbatim: what a
// client not yet upgraded runs against the same masters.
var legacyAcquireScript = goredis.NewScript(`
local o = redis.call('HGET', KEYS[1], 'o')
if o and o ~= ARGV[1] then
  return {0, redis.call('PTTL', KEYS[1]), tonumber(redis.call('HGET', KEYS[1], 'a') or '0'),
          tonumber(redis.call('GET', KEYS[2]) or '0')}
end
if o and ARGV[4] == '1' then
  if redis.call('HSETNX', KEYS[1], 'h' .. ARGV[3], 1) == 1 then
    redis.call('HINCRBY', KEYS[1], 'n', 1)
  end
  if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
  end
  return {1, tonumber(redis.call('HGET', KEYS[1], 'f')), tonumber(redis.call('GET', KEYS[2]) or '0')}
end
if o then
  redis.call('DEL', KEYS[1])
end
` + rediskey.ClockFloor("2") + `
local c = redis.call('INCR', KEYS[2])
if c < tonumber(ARGV[5]) then
  c = tonumber(ARGV[5])
  redis.call('SET', KEYS[2], c)
end
redis.call('HSET', KEYS[1], 'o', ARGV[1], 'n', 1, 'f', c, 'a', ARGV[3], 'h' .. ARGV[3], 1)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {2, c, c}
`)

var legacyReleaseScript = goredis.NewScript(`
if redis.call('HGET', KEYS[1], 'o') ~= ARGV[1] or redis.call('HDEL', KEYS[1], 'h' .. ARGV[3]) == 0 then
  return {0}
end
if redis.call('HINCRBY', KEYS[1], 'n', -1) > 0 then
  return {1}
end
local v = redis.call('HMGET', KEYS[1], 'a', 'f')
redis.call('DEL', KEYS[1])
if ARGV[2] ~= '' then
  redis.call('PUBLISH', ARGV[2], (v[1] or '') .. ' ' .. (v[2] or '0'))
end
return {2}
`)

// legacyRecord writes the previous version's record of key, held by
// owner with fence 7, on every master.
func legacyRecord(t *testing.T, l *testLocker, clients []goredis.UniversalClient, key, owner string) {
	t.Helper()
	for _, c := range clients {
		h := l.anchor(name{driver.Plain, key})
		if err := c.HSet(context.Background(), h, "o", owner, "n", 1, "f", 7, "a", 42, "h42", 1).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.PExpire(context.Background(), h, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// Old and new versions meet on a plain key's record, never past each
// other: this version takes an old client's record for an exclusive
// holder, and an old client takes this version's for another owner's.
func TestLegacyRecordsMeet(t *testing.T) {
	l, clients := plainLocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	old := uniqueKey(t, "old")
	legacyRecord(t, l, clients, old, "old-owner")
	for _, opts := range [][]locker.Option{nil, {locker.Shared()}} {
		if lease, err := l.TryLock(ctx, old, opts...); !errors.Is(err, locker.ErrLocked) {
			t.Fatalf("TryLock(%v) of a key an old client holds = %v, %v; want ErrLocked", opts, lease, err)
		}
	}
	info, err := l.Locker.(locker.Admin).Status(ctx, old)
	if err != nil || info.Owner != "old-owner" || info.Fence != 7 || info.Mode != locker.ModeExclusive {
		t.Errorf("Status of an old client's record = %+v, %v; want old-owner, fence 7, exclusive", info, err)
	}
	if err := l.Locker.(locker.Admin).ForceUnlock(ctx, old); err != nil {
		t.Fatal(err)
	}
	lease, err := l.TryLock(ctx, old)
	if err != nil {
		t.Fatalf("TryLock once the old record was forced away: %v", err)
	}
	_ = lease.Unlock(ctx)

	for _, opts := range [][]locker.Option{nil, {locker.Shared()}} {
		key := uniqueKey(t, "new")
		lease, err := l.Lock(ctx, key, opts...)
		if err != nil {
			t.Fatal(err)
		}
		heldEverywhere(t, clients, l.anchor(name{driver.Plain, key}))
		for i, c := range clients {
			keys := []string{l.anchor(name{driver.Plain, key}), l.counterKey()}
			v, err := legacyAcquireScript.Run(ctx, c, keys, "old-client", 10000, "5", false, 1).Int64Slice()
			if err != nil || v[0] != 0 {
				t.Errorf("master %d: an old client's acquire of a key held (%v) = %v, %v; want refused", i, opts, v, err)
			}
			v, err = legacyReleaseScript.Run(ctx, c, keys[:1], "old-client", "", "5").Int64Slice()
			if err != nil || v[0] != 0 {
				t.Errorf("master %d: an old client's release of a key held (%v) = %v, %v; want not its own", i, opts, v, err)
			}
		}
		if err := lease.Unlock(ctx); err != nil {
			t.Fatalf("Unlock after the old client's tries: %v", err)
		}
	}
}

// heldEverywhere waits until every master has anchor: Lock returns once a
// quorum granted, the others' grants landing a little later.
func heldEverywhere(t *testing.T, clients []goredis.UniversalClient, anchor string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; i < len(clients); {
		n, err := clients[i].Exists(context.Background(), anchor).Result()
		switch {
		case err == nil && n == 1:
			i++
		case time.Now().After(deadline):
			t.Fatalf("master %d: no record of the grant 10 s after it (%v)", i, err)
		default:
			time.Sleep(time.Millisecond) // polling the master: nothing tells when a late grant lands
		}
	}
}
