package redsync

import goredis "github.com/redis/go-redis/v9"

// The per-master steps. A lock record is a hash {o: owner, n: holds,
// f: fence, a: id of the attempt that created it} with a PX expiry; the
// namespace's fence counter is a plain integer without expiry.

// acquireScript: KEYS lock, counter; ARGV owner, ttl ms, attempt id,
// reentrant ("1" for a WithOwner owner), counter floor.
// Replies {0, pttl, its attempt id, counter} when another owner holds the
// record (the id tells one holder's quorum from a split vote), {1, fence,
// counter} on re-entry, {2, counter, counter} on a fresh grant. A fresh
// grant counts one up, or to the floor if that is higher: the client's
// view of the largest counter, which pulls a lagging master level with
// the others. A random owner meeting its own record (left by an earlier
// attempt of the same Lock whose undo was lost) takes it afresh.
var acquireScript = goredis.NewScript(`
local o = redis.call('HGET', KEYS[1], 'o')
if o and o ~= ARGV[1] then
  return {0, redis.call('PTTL', KEYS[1]), tonumber(redis.call('HGET', KEYS[1], 'a') or '0'),
          tonumber(redis.call('GET', KEYS[2]) or '0')}
end
if o and ARGV[4] == '1' then
  redis.call('HINCRBY', KEYS[1], 'n', 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, tonumber(redis.call('HGET', KEYS[1], 'f')), tonumber(redis.call('GET', KEYS[2]) or '0')}
end
local c = redis.call('INCR', KEYS[2])
if c < tonumber(ARGV[5]) then
  c = tonumber(ARGV[5])
  redis.call('SET', KEYS[2], c)
end
redis.call('HSET', KEYS[1], 'o', ARGV[1], 'n', 1, 'f', c, 'a', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {2, c, c}
`)

// claimScript: KEYS lock, counter; ARGV owner, ttl ms, fence, reset holds
// ("1" to set them to 1). It raises the counter to the fence on every
// master (counters only need to grow), and where the record is ours it
// extends it and records the fence: 1 then, else 0. It is both the
// keep-alive and the second acquire round that makes a fence durable.
var claimScript = goredis.NewScript(`
if tonumber(redis.call('GET', KEYS[2]) or '0') < tonumber(ARGV[3]) then
  redis.call('SET', KEYS[2], ARGV[3])
end
if redis.call('HGET', KEYS[1], 'o') ~= ARGV[1] then
  return {0}
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('HSET', KEYS[1], 'f', ARGV[3])
if ARGV[4] == '1' then
  redis.call('HSET', KEYS[1], 'n', 1)
end
return {1}
`)

// releaseScript: KEYS lock; ARGV owner, release channel. Drops one hold
// of ours: 0 if the record is not ours, 1 if holds remain, 2 when it was
// deleted and the release published. Every message of a release carries
// the hold's attempt id, so a waiter counts the masters' copies as one.
var releaseScript = goredis.NewScript(`
if redis.call('HGET', KEYS[1], 'o') ~= ARGV[1] then
  return {0}
end
if redis.call('HINCRBY', KEYS[1], 'n', -1) > 0 then
  return {1}
end
local a = redis.call('HGET', KEYS[1], 'a')
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], a or '')
return {2}
`)

// undoScript: KEYS lock; ARGV owner, attempt id, reentered
// ("1"), release channel or "" to stay silent. Takes back what one failed
// attempt did on this master: the hold it added to our record, or the
// record it created (recognised by the attempt id, so a late undo never
// deletes a later attempt's grant). The counter keeps the failed grant's
// count: the winner of the same round counted once on each of its masters
// too, so the masters' counters stay equal, which spares the next holder
// the second round.
var undoScript = goredis.NewScript(`
if redis.call('HGET', KEYS[1], 'o') ~= ARGV[1] then
  return {0}
end
if ARGV[3] == '1' then
  if redis.call('HINCRBY', KEYS[1], 'n', -1) > 0 then
    return {1}
  end
elseif redis.call('HGET', KEYS[1], 'a') ~= ARGV[2] then
  return {0}
end
redis.call('DEL', KEYS[1])
if ARGV[4] ~= '' then
  redis.call('PUBLISH', ARGV[4], ARGV[2])
end
return {2}
`)

// forceScript: KEYS lock; ARGV release channel. Deletes whoever's record.
var forceScript = goredis.NewScript(`
local a = redis.call('HGET', KEYS[1], 'a')
if redis.call('DEL', KEYS[1]) == 0 then
  return {0}
end
redis.call('PUBLISH', ARGV[1], a or 'force')
return {1}
`)

// statusScript: KEYS lock. Replies {owner, holds, fence, pttl}, or an
// empty list when there is no record.
var statusScript = goredis.NewScript(`
local v = redis.call('HMGET', KEYS[1], 'o', 'n', 'f')
if not v[1] then
  return {}
end
return {v[1], v[2], v[3], redis.call('PTTL', KEYS[1])}
`)
