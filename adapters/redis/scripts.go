package redis

import (
	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker/internal/rediskey"
)

// Per key, under the prefix:
//
//	lock:<key>   string "fence:ids:owner", its PX expiry the lease
//	queue:<key>  sorted set of waiting Lock calls' tokens, by arrival
//	qexp:<key>   hash token -> when that waiter's place lapses (ms, server clock)
//
// ids are the holds, one id per lease, space-separated: the id of the call
// that took it. Adding an id that is there, or removing one that is not,
// changes nothing, so a call that go-redis (or the caller) retries after a
// lost reply is applied once, and a release can only ever drop its own
// hold. A free lock goes to the first live waiter in the queue (FIFO); a
// waiter refreshes its place each time it looks, so a crashed waiter's
// place lapses like a crashed holder's lease. A waiter's token is
// "client.call"; each client (Locker) listens on a channel of its own,
// w:<client>, and the release publishes the next waiter's token there only,
// so one client wakes per handoff. Redis drops a queue or hash when it
// empties, so nothing is left once all waiters are gone.

// prelude holds the helpers every script shares.
const prelude = `
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- parse splits a lock value into fence, ids and owner.
local function parse(v)
  return string.match(v, '^(%d+):([^:]*):(.*)$')
end
local function has(ids, id)
  return string.find(' ' .. ids .. ' ', ' ' .. id .. ' ', 1, true) ~= nil
end
local function without(ids, id)
  local rest = {}
  for w in string.gmatch(ids, '%S+') do
    if w ~= id then rest[#rest + 1] = w end
  end
  return table.concat(rest, ' ')
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
-- drop removes hold id from the lock; the last one deletes it and wakes
-- the next waiter. It returns false if id held nothing.
local function drop(lock, q, qx, wake, id)
  local v = redis.call('GET', lock)
  if not v then return false end
  local f, ids, o = parse(v)
  if not has(ids, id) then return false end
  local rest = without(ids, id)
  if rest ~= '' then
    redis.call('SET', lock, f .. ':' .. rest .. ':' .. o, 'KEEPTTL')
  else
    redis.call('DEL', lock)
    announce(q, qx, wake)
  end
  return true
end
`

// acquireScript: KEYS lock, fence counter, queue, qexp; ARGV owner, ttl ms,
// call id (the new hold's id), token ("" for TryLock, which never queues).
// Returns {1, fence} when held (new or re-entered); {0, ms} when not, ms
// being how long until the holder's lease or the first waiter's place lapses.
var acquireScript = goredis.NewScript(prelude + `
local ttl = tonumber(ARGV[2])
local v = redis.call('GET', KEYS[1])
if v then
  local f, ids, o = parse(v)
  if o == ARGV[1] then
    if not has(ids, ARGV[3]) then
      local keep = math.max(ttl, redis.call('PTTL', KEYS[1]))
      redis.call('SET', KEYS[1], f .. ':' .. ids .. ' ' .. ARGV[3] .. ':' .. o, 'PX', keep)
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
` + rediskey.ClockFloor("2") + `
local f = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], string.format('%d:%s:%s', f, ARGV[3], ARGV[1]), 'PX', ttl)
return {1, f}
`)

// releaseScript: KEYS lock, queue, qexp; ARGV owner, hold id, wake channel
// prefix. Drops that hold; the last one deletes the lock and wakes the
// first waiter. Returns 1 if the hold was there, 0 if not.
var releaseScript = goredis.NewScript(prelude + `
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local _, _, o = parse(v)
if o ~= ARGV[1] then return 0 end
if drop(KEYS[1], KEYS[2], KEYS[3], ARGV[3], ARGV[2]) then return 1 end
return 0
`)

// refreshScript: KEYS lock; ARGV owner, ttl ms, hold id. Never shortens
// the expiry that another hold of the same owner set. Returns 1 if the hold
// is there, 0 if not.
var refreshScript = goredis.NewScript(prelude + `
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local _, ids, o = parse(v)
if o ~= ARGV[1] or not has(ids, ARGV[3]) then return 0 end
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1
`)

// abandonScript: KEYS lock, queue, qexp; ARGV call, wake channel prefix. A
// call that failed leaves the queue, and takes back the hold it was granted
// if its reply was lost (the hold's id is the call's). If the lock is free,
// the next waiter is woken: it may have waited behind us.
var abandonScript = goredis.NewScript(prelude + `
leave(KEYS[2], KEYS[3], ARGV[1])
if drop(KEYS[1], KEYS[2], KEYS[3], ARGV[2], ARGV[1]) then return 1 end
if redis.call('EXISTS', KEYS[1]) == 0 then announce(KEYS[2], KEYS[3], ARGV[2]) end
return 1
`)

// forceScript: KEYS lock, queue, qexp; ARGV wake channel prefix. The admin
// release.
var forceScript = goredis.NewScript(prelude + `
if redis.call('DEL', KEYS[1]) == 0 then return 0 end
announce(KEYS[2], KEYS[3], ARGV[1])
return 1
`)
