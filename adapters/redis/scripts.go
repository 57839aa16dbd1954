package redis

import goredis "github.com/redis/go-redis/v9"

// Per key, under the prefix:
//
//	lock:<key>   string "fence:holds:op:owner", its PX expiry the lease
//	queue:<key>  sorted set of waiting Lock calls' tokens, by arrival
//	qexp:<key>   hash token -> when that waiter's place lapses (ms, server clock)
//
// op is the id of the last call that changed the lock, so a call that
// go-redis retries after a lost reply is not applied twice. A free lock
// goes to the first live waiter in the queue (FIFO); a waiter refreshes its
// place each time it looks, so a crashed waiter's place lapses like a
// crashed holder's lease. A waiter's token is "client.call"; each client
// (Locker) listens on a channel of its own, w:<client>, and the release
// publishes the next waiter's token there only, so one client wakes per
// handoff. Redis drops a queue or hash when it empties, so nothing is left
// once all waiters are gone.

// prelude holds the helpers every script shares.
const prelude = `
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- head drops lapsed waiters and returns the first live one and its expiry.
local function head(q, qx, now)
  while true do
    local h = redis.call('ZRANGE', q, 0, 0)[1]
    if not h then return nil end
    local exp = tonumber(redis.call('HGET', qx, h) or '0')
    if exp > now then return h, exp end
    redis.call('ZREM', q, h)
    redis.call('HDEL', qx, h)
  end
end
local function enqueue(q, qx, token, now, ttl)
  redis.call('ZADD', q, 'NX', now, token)
  redis.call('HSET', qx, token, now + ttl)
end
local function leave(q, qx, token)
  redis.call('ZREM', q, token)
  redis.call('HDEL', qx, token)
end
-- announce wakes the first live waiter, if any: its token "client.call"
-- goes out on the channel of its client, wake .. client.
local function announce(q, qx, wake)
  if redis.call('EXISTS', q) == 0 then return end
  local h = head(q, qx, now_ms())
  if h then redis.call('PUBLISH', wake .. string.match(h, '^([^.]*)'), h) end
end
`

// acquireScript: KEYS lock, fence counter, queue, qexp; ARGV owner, ttl ms,
// op, token ("" for TryLock, which never queues).
// Returns {1, fence} when held (new or re-entered); {0, ms} when not, ms
// being how long until the holder's lease or the first waiter's place lapses.
var acquireScript = goredis.NewScript(prelude + `
local ttl = tonumber(ARGV[2])
local v = redis.call('GET', KEYS[1])
if v then
  local f, n, op, o = string.match(v, '^(%d+):(%d+):([^:]*):(.*)$')
  if o == ARGV[1] then
    if op ~= ARGV[3] then
      local keep = math.max(ttl, redis.call('PTTL', KEYS[1]))
      redis.call('SET', KEYS[1], string.format('%s:%d:%s:%s', f, n + 1, ARGV[3], o), 'PX', keep)
    end
    if ARGV[4] ~= '' then leave(KEYS[3], KEYS[4], ARGV[4]) end
    return {1, tonumber(f)}
  end
  if ARGV[4] ~= '' then enqueue(KEYS[3], KEYS[4], ARGV[4], now_ms(), ttl) end
  return {0, redis.call('PTTL', KEYS[1])}
end
if redis.call('EXISTS', KEYS[3]) == 1 then
  local now = now_ms()
  local h, exp = head(KEYS[3], KEYS[4], now)
  if h and h ~= ARGV[4] then
    if ARGV[4] ~= '' then enqueue(KEYS[3], KEYS[4], ARGV[4], now, ttl) end
    return {0, exp - now}
  end
  if h then leave(KEYS[3], KEYS[4], h) end
end
local f = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], string.format('%d:1:%s:%s', f, ARGV[3], ARGV[1]), 'PX', ttl)
return {1, f}
`)

// releaseScript: KEYS lock, queue, qexp; ARGV owner, op, wake channel
// prefix. Drops one hold; the last one deletes the lock and wakes the first
// waiter.
// Returns 1 if the hold was ours, 0 if not.
var releaseScript = goredis.NewScript(prelude + `
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
announce(KEYS[2], KEYS[3], ARGV[3])
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

// abandonScript: KEYS lock, queue, qexp; ARGV call, wake channel prefix. A
// call that failed leaves the queue, and takes back the hold it was granted
// if its reply was lost (the lock's op is then the call's id). If the lock
// is free, the next waiter is woken: it may have waited behind us.
var abandonScript = goredis.NewScript(prelude + `
leave(KEYS[2], KEYS[3], ARGV[1])
local v = redis.call('GET', KEYS[1])
if v then
  local f, n, op, o = string.match(v, '^(%d+):(%d+):([^:]*):(.*)$')
  if op ~= ARGV[1] then return 1 end
  n = tonumber(n)
  if n > 1 then
    redis.call('SET', KEYS[1], string.format('%s:%d:%s:%s', f, n - 1, 'x' .. ARGV[1], o), 'KEEPTTL')
    return 1
  end
  redis.call('DEL', KEYS[1])
end
announce(KEYS[2], KEYS[3], ARGV[2])
return 1
`)

// forceScript: KEYS lock, queue, qexp; ARGV wake channel prefix. The admin
// release.
var forceScript = goredis.NewScript(prelude + `
if redis.call('DEL', KEYS[1]) == 0 then return 0 end
announce(KEYS[2], KEYS[3], ARGV[1])
return 1
`)
