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
// ids are the holds, one per lease (the id of the call that took it),
// space-separated. Adding an id that is there, or removing one that is not,
// changes nothing, so a retried call applies once and a release drops only
// its own hold. A waiter refreshes its place each time it looks; its token
// "client.call" is published on its client's channel only, w:<client>.

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
local function enqueue(q, qx, token, now, ttl)
  redis.call('ZADD', q, 'NX', now, token)
  redis.call('HSET', qx, token, now + ttl)
end
local function leave(q, qx, token)
  redis.call('ZREM', q, token)
  redis.call('HDEL', qx, token)
end
-- head drops lapsed waiters and returns the first live one and its expiry.
local function head(q, qx, now)
  while true do
    local h = redis.call('ZRANGE', q, 0, 0)[1]
    if not h then return nil end
    local exp = tonumber(redis.call('HGET', qx, h) or '0')
    if exp > now then return h, exp end
    leave(q, qx, h)
  end
end
-- announce wakes the first live waiter, if any: its token "client.call"
-- goes out on the channel of its client, wake .. client.
local function announce(q, qx, wake)
  if redis.call('EXISTS', q) == 0 then return end
  local h = head(q, qx, now_ms())
  if h then redis.call('PUBLISH', wake .. string.match(h, '^([^.]*)'), h) end
end
-- drop removes hold id from the lock (if owner is given, only from
-- owner's); the last one deletes it and wakes the next waiter. It returns
-- false if id held nothing.
local function drop(lock, q, qx, wake, id, owner)
  local v = redis.call('GET', lock)
  if not v then return false end
  local f, ids, o = parse(v)
  if not has(ids, id) or (owner and o ~= owner) then return false end
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

// acquireScript: KEYS lock, queue, qexp, fence counter; ARGV owner, ttl ms,
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
    if ARGV[4] ~= '' then leave(KEYS[2], KEYS[3], ARGV[4]) end
    return {1, tonumber(f)}
  end
  if ARGV[4] ~= '' then enqueue(KEYS[2], KEYS[3], ARGV[4], now_ms(), ttl) end
  local left = redis.call('PTTL', KEYS[1])
  return {0, left >= 0 and left or ttl} -- no expiry: not ours; look again after our TTL
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  local now = now_ms()
  local h, exp = head(KEYS[2], KEYS[3], now)
  if h and h ~= ARGV[4] then
    if ARGV[4] ~= '' then enqueue(KEYS[2], KEYS[3], ARGV[4], now, ttl) end
    return {0, exp - now}
  end
  if h then leave(KEYS[2], KEYS[3], h) end
end
` + rediskey.ClockFloor("4") + `
local f = redis.call('INCR', KEYS[4])
redis.call('SET', KEYS[1], string.format('%d:%s:%s', f, ARGV[3], ARGV[1]), 'PX', ttl)
return {1, f}
`)

// releaseScript: KEYS lock, queue, qexp; ARGV owner, hold id, wake channel
// prefix. Drops that hold (see drop): 1 if it was there, 0 if not.
var releaseScript = goredis.NewScript(prelude + `
if drop(KEYS[1], KEYS[2], KEYS[3], ARGV[3], ARGV[2], ARGV[1]) then return 1 end
return 0
`)

// refreshScript: KEYS lock; ARGV owner, ttl ms, hold id: 1 if the hold is
// there, 0 if not. Never shortens the expiry another hold of the owner set.
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
// failed call leaves the queue and takes back its hold, if any; if the lock
// is free, the next waiter, who may have waited behind it, is woken.
var abandonScript = goredis.NewScript(prelude + `
leave(KEYS[2], KEYS[3], ARGV[1])
if not drop(KEYS[1], KEYS[2], KEYS[3], ARGV[2], ARGV[1]) and redis.call('EXISTS', KEYS[1]) == 0 then
  announce(KEYS[2], KEYS[3], ARGV[2])
end
return 1
`)

// forceScript: KEYS lock, queue, qexp; ARGV wake channel prefix.
var forceScript = goredis.NewScript(prelude + `
if redis.call('DEL', KEYS[1]) == 0 then return 0 end
announce(KEYS[2], KEYS[3], ARGV[1])
return 1
`)
