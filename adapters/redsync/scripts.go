package redsync

import (
	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker/internal/rediskey"
)

// The per-master steps. A lock record is a hash {o: owner, n: holds,
// f: fence, a: id of the attempt that created it, h<id>: one field per
// hold, named by the id of the attempt that added it} with a PX expiry
// that only grows (one owner's holds share it). Holds are a set, so that
// a retried release, or the undo of an attempt whose reply was lost, drops
// the hold it names and never another; n is its size, for Status.

// acquireScript: KEYS lock, counter; ARGV owner, ttl ms, attempt id,
// reentrant (1 for a WithOwner owner), counter floor. Replies {0, pttl,
// holder's attempt id (one holder or a split vote?), counter} when held by
// another, {1, fence, counter} on re-entry, {2, counter, counter} on a
// fresh grant, which counts one up or to the floor (the largest counter
// the client saw: a lagging master catches up). A random owner meeting its
// own record (an earlier attempt's lost undo) takes it afresh.
var acquireScript = goredis.NewScript(`
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

// claimScript: KEYS lock, counter; ARGV owner, ttl ms, fence, hold id.
// Raises the counter to the fence, and where the record has our hold
// extends it and records the fence: 1 then, else 0. It is the keep-alive
// and the second acquire round that makes a fence durable.
var claimScript = goredis.NewScript(`
if tonumber(redis.call('GET', KEYS[2]) or '0') < tonumber(ARGV[3]) then
  redis.call('SET', KEYS[2], ARGV[3])
end
if redis.call('HGET', KEYS[1], 'o') ~= ARGV[1] or redis.call('HEXISTS', KEYS[1], 'h' .. ARGV[4]) == 0 then
  return {0}
end
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
redis.call('HSET', KEYS[1], 'f', ARGV[3])
return {1}
`)

// releaseScript: KEYS lock; ARGV owner, channel ("": silent), hold id.
// Drops that hold: 0 if the record lacks it, 1 if holds remain, 2 when the
// record was deleted, which publishes "<a> <f>" (see news). It is also the
// undo of a failed attempt, whose hold id is the attempt's.
var releaseScript = goredis.NewScript(`
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

// forceScript: KEYS lock; ARGV release channel. Deletes whoever's record.
var forceScript = goredis.NewScript(`
local v = redis.call('HMGET', KEYS[1], 'a', 'f')
if redis.call('DEL', KEYS[1]) == 0 then
  return {0}
end
redis.call('PUBLISH', ARGV[1], (v[1] or 'force') .. ' ' .. (v[2] or '0'))
return {1}
`)

// statusScript: KEYS lock. Replies {owner, holds, fence, pttl}, or {}.
var statusScript = goredis.NewScript(`
local v = redis.call('HMGET', KEYS[1], 'o', 'n', 'f')
if not v[1] then
  return {}
end
return {v[1], v[2], v[3], redis.call('PTTL', KEYS[1])}
`)
