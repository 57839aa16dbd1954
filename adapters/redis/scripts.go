package redis

import goredis "github.com/redis/go-redis/v9"

// A lock is one string key, prefix+"lock:"+key, whose value is
// "fence:holds:op:owner" and whose PX expiry is the lease. op is the id of
// the last call that changed it, so a call that go-redis retries after a
// lost reply is recognised and not applied twice (a second hold, a second
// release). Every script checks the owner before touching the key.

// acquireScript: KEYS lock, fence counter; ARGV owner, ttl ms, op.
// Returns {1, fence} when held (new or re-entered), {0, pttl} when another
// owner holds it: pttl is the waiter's fallback timer.
var acquireScript = goredis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then
  local f = redis.call('INCR', KEYS[2])
  redis.call('SET', KEYS[1], string.format('%d:1:%s:%s', f, ARGV[3], ARGV[1]), 'NX', 'PX', ARGV[2])
  return {1, f}
end
local f, n, op, o = string.match(v, '^(%d+):(%d+):([^:]*):(.*)$')
if o ~= ARGV[1] then
  return {0, redis.call('PTTL', KEYS[1])}
end
if op ~= ARGV[3] then
  local ttl = math.max(tonumber(ARGV[2]), redis.call('PTTL', KEYS[1]))
  redis.call('SET', KEYS[1], string.format('%s:%d:%s:%s', f, n + 1, ARGV[3], o), 'PX', ttl)
end
return {1, tonumber(f)}
`)

// releaseScript: KEYS lock; ARGV owner, op, channel. Drops one hold; the
// last one deletes the key and publishes the release to waiters.
// Returns 1 if the hold was ours, 0 if not.
var releaseScript = goredis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local f, n, op, o = string.match(v, '^(%d+):(%d+):([^:]*):(.*)$')
if o ~= ARGV[1] then return 0 end
if op == ARGV[2] then return 1 end
n = tonumber(n)
if n > 1 then
  redis.call('SET', KEYS[1], string.format('%s:%d:%s:%s', f, n - 1, ARGV[2], o), 'KEEPTTL')
  return 1
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[3], '')
return 1
`)

// refreshScript: KEYS lock; ARGV owner, ttl ms. Never shortens the expiry
// that another hold of the same owner set. Returns 1 if ours, 0 if not.
var refreshScript = goredis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local o = string.match(v, '^%d+:%d+:[^:]*:(.*)$')
if o ~= ARGV[1] then return 0 end
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1
`)

// forceScript: KEYS lock; ARGV channel. The admin release: any owner.
var forceScript = goredis.NewScript(`
if redis.call('DEL', KEYS[1]) == 0 then return 0 end
redis.call('PUBLISH', ARGV[1], '')
return 1
`)
