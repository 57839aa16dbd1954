package redis

import (
	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker/internal/rediskey"
)

// Per lock, under the prefix (the Subtree space's names begin with "t"):
//
//	lock:<key>   hash: "h<mode>:<owner>" -> "fence:ids" per holder, one
//	             per owner and mode, ids being its holds (one per lease,
//	             the id of the call that took it, space-separated);
//	             "c<mode>" -> how many holders the key has in that mode;
//	             and, while it has Limited holders (c4 > 0), "n" -> their
//	             Limit (read only then: a key whose last one left forgets it)
//	exp:<key>    sorted set "<mode>:<owner>" by when that holder lapses
//	             (ms, server clock), for holders other than X: once the
//	             clock has passed it, as a key's PX lapses. The clock
//	             counts whole ms, rounded down, so the score may be reached
//	             up to 1 ms before the TTL has run from the grant, and from
//	             its call's start (the lease's Deadline); passed, it has.
//	queue:<key>  sorted set of waiting Lock calls' tokens, by arrival
//	qexp:<key>   hash token -> when that waiter's place lapses; and, for
//	             an exclusive or shared waiter, "i"..token -> "<ttl ms>
//	             <owner>", for a Limited one "<ttl ms> <n> <owner>": what a
//	             release needs to grant it the key (see releaseScript)
//
// Modes are driver.Mode's values: 0 X, 1 S, 2 IS, 3 IX, 4 L (Limited, a
// semaphore's: no mode of the matrix, see limit); a token
// "client.call:mode" carries its waiter's. An X holder is alone, so the
// lock's own PX expiry is its lapse; the others lapse by exp, and are
// evicted in expiry order whenever a script meets them, so the counts
// answer "does an incompatible holder exist" without scanning compatible
// ones (a subtree's top node may have thousands of intention holders).
// The keys expire with the last holder. Adding an id that is there, or
// removing one that is not, changes nothing, so a retried call applies
// once and a release drops only its own hold. A waiter refreshes its place
// each time it looks; its token is published on its client's channel
// only, w:<client>, when a change may admit it.
//
// Every script begins with its fast path, the one an exclusive lock takes
// when nobody else is there, in as few server calls as before modes (each
// call costs the single-threaded server time; TIME the most): helpers and
// the clock come after it.

// ids holds the helpers of hold-id lists.
const ids = `
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
`

// basics holds the helpers of the queue and of lapsed holders, which the
// exclusive acquire needs too.
const basics = `
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- evict drops the holders that lapsed by now (see exp); true if there
-- were any. The last Limited holder takes the key's n with it.
local function evict(lock, exp, now)
  local lapsed = redis.call('ZRANGEBYSCORE', exp, '-inf', '(' .. now)
  for _, m in ipairs(lapsed) do
    if redis.call('HDEL', lock, 'h' .. m) == 1 then
      local o = string.sub(m, 1, 1)
      if redis.call('HINCRBY', lock, 'c' .. o, -1) <= 0 and o == '4' then redis.call('HDEL', lock, 'n') end
    end
    redis.call('ZREM', exp, m)
  end
  return #lapsed > 0
end
-- enqueue keeps token's place, a newcomer's after every waiter: scores
-- rise strictly, since Redis orders equal scores by name, and a newcomer
-- sorted before an earlier waiter would keep it out while nobody wakes it.
local function enqueue(q, qx, token, now, ttl, owner, m, n)
  local last = redis.call('ZRANGE', q, -1, -1, 'WITHSCORES')[2]
  redis.call('ZADD', q, 'NX', math.max(now, tonumber(last or '0') + 1), token)
  if m == 1 then -- what a release needs to hand it the key (see releaseScript)
    redis.call('HSET', qx, token, now + ttl, 'i' .. token, ttl .. ' ' .. owner)
  elseif m == 4 then
    redis.call('HSET', qx, token, now + ttl, 'i' .. token, ttl .. ' ' .. n .. ' ' .. owner)
  else
    redis.call('HSET', qx, token, now + ttl)
  end
end
local function leave(q, qx, token)
  redis.call('ZREM', q, token)
  redis.call('HDEL', qx, token, 'i' .. token)
end
-- keep makes the lock's keys live at least ttl ms more, and no less
-- than each other.
local function keep(lock, exp, ttl)
  local left = redis.call('PTTL', lock)
  if left < ttl then
    redis.call('PEXPIRE', lock, ttl)
    redis.call('PEXPIRE', exp, ttl)
  elseif redis.call('PTTL', exp) == -1 then
    redis.call('PEXPIRE', exp, left)
  end
end
`

// notifyLua: notify(wake, w, msg) tells waiter w msg: on its Locker's
// channel wake..<its client id>, or, where wake is "s:<channel>" (a
// slotted cluster), on its Locker's channel of the lock, <channel>:<its
// client id> (SPUBLISH; the channel shares the lock's slot), and on the
// lock's channel, where the Lockers of earlier versions listen (a
// Locker of this version misses an earlier version's wakes, and looks
// again at its timer).
const notifyLua = `
local function notify(wake, w, msg)
  local client = string.match(w, '^([^.]*)')
  if string.sub(wake, 1, 2) == 's:' then
    local ch = string.sub(wake, 3)
    redis.call('SPUBLISH', ch .. ':' .. client, msg)
    redis.call('SPUBLISH', ch, msg)
  else
    redis.call('PUBLISH', wake .. client, msg)
  end
end
`

// prelude holds the helpers of the general paths.
var prelude = basics + notifyLua + `
-- compat says whether modes a and b may hold one key together (driver.Mode's
-- matrix; L, Limited, is compatible with nothing: see limit).
local matrix = '0000001100011100011000000'
local function compat(a, b)
  return string.byte(matrix, a * 5 + b + 1) == 49
end
-- counts returns the holders by mode, indexed 0..4.
local function counts(lock)
  local c = redis.call('HMGET', lock, 'c0', 'c1', 'c2', 'c3', 'c4')
  return {[0] = tonumber(c[1] or '0'), tonumber(c[2] or '0'), tonumber(c[3] or '0'), tonumber(c[4] or '0'), tonumber(c[5] or '0')}
end
-- blocked says whether a holder's mode excludes m.
local function blocked(c, m)
  for o = 0, 4 do
    if c[o] > 0 and not compat(m, o) then return true end
  end
  return false
end
local function mode_of(token)
  return tonumber(string.sub(token, -1))
end
-- waiting visits the live waiters in arrival order, dropping lapsed ones,
-- until visit returns true; it returns what stopped it.
local function waiting(q, qx, now, visit)
  local i = 0
  while true do
    local batch = redis.call('ZRANGE', q, i, i + 15)
    if #batch == 0 then return nil end
    local exps = redis.call('HMGET', qx, unpack(batch))
    local kept = 0
    for j, w in ipairs(batch) do
      local exp = tonumber(exps[j] or '0')
      if exp <= now then
        leave(q, qx, w)
      else
        kept = kept + 1
        if visit(w, exp) then return w, exp end
      end
    end
    i = i + kept
  end
end
-- ahead returns the expiry of the first live waiter before token ("": a
-- call that does not queue comes after every waiter) whose mode excludes m.
local function ahead(q, qx, token, m, now)
  local w, exp = waiting(q, qx, now, function(w)
    return w == token or not compat(m, mode_of(w))
  end)
  if w and w ~= token then return exp end
  return nil
end
-- limit applies driver.Limiter's rules 2 and 3 to a request in mode m (of
-- Limit n, if Limited) where m is Limited or Limited holders hold the key
-- (counts c): nil if it may be granted, else {0, ms to wait} or
-- {-2, the mode held, its Limit if Limited}. A Limited request is granted
-- while the holders and the live Limited waiters before it are fewer than
-- n; it waits until the first of them lapses.
local function limit(lock, exp, q, qx, c, m, token, ttl, now, n)
  if m ~= 4 then return {-2, 4, tonumber(redis.call('HGET', lock, 'n') or '0')} end
  for o = 0, 3 do
    if c[o] > 0 then return {-2, o, 0} end
  end
  local taken, first = c[4], nil
  if taken > 0 then
    local held = tonumber(redis.call('HGET', lock, 'n') or '0')
    if held ~= n then return {-2, 4, held} end
  end
  if taken < n then
    waiting(q, qx, now, function(w, e)
      if w == token then return true end
      if mode_of(w) == 4 then taken, first = taken + 1, first or e end
      return taken >= n
    end)
    if taken < n then return nil end
  end
  local left = tonumber(redis.call('ZRANGE', exp, 0, 0, 'WITHSCORES')[2] or first or now + ttl)
  return {0, math.max(math.min(left, first or left) - now, 0)}
end
-- handfence, where a script sets it (releaseScript: its fence counter),
-- lets announce hand the key to an exclusive waiter it admits.
local handfence
-- handx grants exclusive waiter w the key, if its queue entry says how
-- (see releaseScript), and tells it "g <token> <fence>"; false if not.
local function handx(lock, q, qx, wake, w)
  local ttl, owner = string.match(redis.call('HGET', qx, 'i' .. w) or '', '^(%d+) (.*)$')
  if not ttl then return false end
  local f
` + rediskey.NextFence("f", "handfence") + `
  redis.call('HSET', lock, 'h0:' .. owner, string.format('%d:%s', f, string.match(w, '^(.*):%d$')), 'c0', 1)
  redis.call('PEXPIRE', lock, tonumber(ttl))
  leave(q, qx, w)
  notify(wake, w, 'g ' .. w .. ' ' .. string.format('%d', f))
  return true
end
-- handl grants Limited waiter w the key as handx does an exclusive one,
-- from its queue entry x = {ttl, n, owner}.
local function handl(lock, exp, q, qx, wake, w, x, now)
  local f
` + rediskey.NextFence("f", "handfence") + `
  redis.call('HSET', lock, 'h4:' .. x[3], string.format('%d:%s', f, string.match(w, '^(.*):%d$')), 'n', x[2])
  redis.call('HINCRBY', lock, 'c4', 1)
  redis.call('ZADD', exp, now + x[1], '4:' .. x[3])
  keep(lock, exp, x[1])
  leave(q, qx, w)
  notify(wake, w, 'g ' .. w .. ' ' .. string.format('%d', f))
end
-- turn is announce's visit of Limited waiter w: admitted (listed in admit)
-- where no other mode holds the key and the holders and the Limited
-- waiters before it (counted in lim) are fewer than its n, the holders'
-- if any. True once nobody after it can be admitted.
local function turn(qx, c, lim, w, admit)
  if c[1] + c[2] + c[3] > 0 then return true end -- a mismatch, and a wall
  local ttl, n, owner = string.match(redis.call('HGET', qx, 'i' .. w) or '', '^(%d+) (%d+) (.*)$')
  n = tonumber(n)
  lim.n = lim.n or n
  if lim.n and lim.taken < lim.n and n == lim.n then admit[#admit + 1] = {w, {tonumber(ttl), n, owner}} end
  lim.taken = lim.taken + 1
  return lim.n ~= nil and lim.taken >= lim.n
end
-- announce wakes every waiter the holders (counts c, else the lock's) and
-- the waiters before it now admit; past a waiting X, nobody is. A release
-- (handfence) hands the key to the Limited waiters it admits, after the
-- walk (which a waiter leaving the queue would upset).
local function announce(lock, exp, q, qx, wake, now, c)
  c = c or counts(lock)
  if c[0] > 0 then return end
  local seen, lim, admit = {[0] = 0, 0, 0, 0, 0}, {taken = c[4]}, {}
  if c[4] > 0 then lim.n = tonumber(redis.call('HGET', lock, 'n') or '0') end
  waiting(q, qx, now, function(w)
    local m = mode_of(w)
    if m == 4 then
      seen[4] = 1
      return turn(qx, c, lim, w, admit)
    end
    if not blocked(c, m) and not blocked(seen, m) then
      if m == 0 and handfence and handx(lock, q, qx, wake, w) then return true end
      notify(wake, w, w)
    end
    seen[m] = 1
    return m == 0
  end)
  for _, a in ipairs(admit) do
    local w, x = a[1], a[2]
    if handfence and redis.call('HEXISTS', lock, 'h4:' .. x[3]) == 0 then -- an owner holding it already looks
      handl(lock, exp, q, qx, wake, w, x, now)
    else
      notify(wake, w, w)
    end
  end
end
-- state reads, in one call, the holder counts by mode and owner's holder
-- of the lock: its mode, field and record if any (one in another mode
-- than m first: a mismatch).
local function state(lock, owner, m)
  local f = redis.call('HMGET', lock, 'c0', 'c1', 'c2', 'c3', 'c4',
    'h0:' .. owner, 'h1:' .. owner, 'h2:' .. owner, 'h3:' .. owner, 'h4:' .. owner)
  local c = {[0] = tonumber(f[1] or '0'), tonumber(f[2] or '0'), tonumber(f[3] or '0'), tonumber(f[4] or '0'), tonumber(f[5] or '0')}
  for o = 0, 4 do
    if f[o + 6] and o ~= m then return c, o, 'h' .. o .. ':' .. owner, f[o + 6] end
  end
  if f[m + 6] then return c, m, 'h' .. m .. ':' .. owner, f[m + 6] end
  return c
end
-- try applies the grant rule to one request (of Limit n, if Limited)
-- without granting it: nil if it may be granted (then field and rec are
-- the owner's holder to re-enter, if any), else {0, ms to wait}, {-1, the
-- mode the owner holds} or {-2, ...} (see limit).
local function try(lock, exp, q, qx, owner, m, token, ttl, now, n)
  local c, o, field, rec = state(lock, owner, m)
  if c[1] + c[2] + c[3] + c[4] > 0 and evict(lock, exp, now) then -- X holders lapse with the lock
    c, o, field, rec = state(lock, owner, m)
  end
  if o and o ~= m then return {-1, o} end
  if o then return nil, field, rec end
  if m == 4 or c[4] > 0 then return limit(lock, exp, q, qx, c, m, token, ttl, now, n) end
  if blocked(c, m) then
    local left = redis.call('PTTL', lock)
    return {0, left >= 0 and left or ttl}
  end
  local exp_w = ahead(q, qx, token, m, now)
  if exp_w then return {0, exp_w - now} end
  return nil
end
-- grant makes the request a holder (or joins its owner's holder) and
-- returns its fence (none for an intention holder: never a lease's); a
-- new Limited holder sets the key's n.
local function grant(lock, exp, q, qx, fence, owner, m, id, token, ttl, now, field, rec, n)
  local member = m .. ':' .. owner
  local f
  if field then
    local held
    f, held = string.match(rec, '^(%d+):(.*)$')
    if not has(held, id) then redis.call('HSET', lock, field, f .. ':' .. held .. ' ' .. id) end
    f = tonumber(f)
  else
    f = 0
    if m < 2 or m == 4 then
` + rediskey.NextFence("f", "fence") + `
    end
    if m == 0 then -- alone: the lock's expiry is its own
      redis.call('HSET', lock, 'h' .. member, string.format('%d:%s', f, id), 'c0', 1)
      redis.call('PEXPIRE', lock, ttl)
      if token ~= '' then leave(q, qx, token) end
      return f
    elseif m == 4 then
      redis.call('HSET', lock, 'h' .. member, string.format('%d:%s', f, id), 'n', n)
    else
      redis.call('HSET', lock, 'h' .. member, string.format('%d:%s', f, id))
    end
    redis.call('HINCRBY', lock, 'c' .. m, 1)
  end
  if m ~= 0 then redis.call('ZADD', exp, 'GT', now + ttl, member) end
  keep(lock, exp, ttl)
  if token ~= '' then leave(q, qx, token) end
  return f
end
-- fresh grants a request on a key nobody holds or waits for, as
-- acquireScript's fast path does, and returns its fence.
local function fresh(lock, exp, fence, owner, m, id, ttl, now, n)
  local f = 0
  if m < 2 or m == 4 then
` + rediskey.NextFence("f", "fence") + `
  end
  redis.call('HSET', lock, 'h' .. m .. ':' .. owner, string.format('%d:%s', f, id), 'c' .. m, 1)
  redis.call('PEXPIRE', lock, ttl)
  if m ~= 0 then
    redis.call('ZADD', exp, now + ttl, m .. ':' .. owner)
    redis.call('PEXPIRE', exp, ttl)
    if m == 4 then redis.call('HSET', lock, 'n', n) end
  end
  return f
end
-- busy says whether any of the keys (KEYS[from], KEYS[from + step], ...)
-- exists, in one call where they are few enough to unpack.
local function busy(from, step)
  local ks = {}
  for k = from, #KEYS, step do ks[#ks + 1] = KEYS[k] end
  return #ks > 4000 or redis.call('EXISTS', unpack(ks)) > 0
end
-- alone says whether hold id of owner in mode m is the key's only hold
-- (its count the only one, its record this id alone, not lapsed): then
-- the keys may go, and nobody is to be woken where nobody waits. An X
-- hold lapses with the key; an S or L hold by exp. An intention hold (IS,
-- IX) is never a lease's own node, whose hold, released in the same call,
-- answers for the lease: alone, its lapse changes nothing.
local function alone(lock, exp, owner, m, id, clock)
  local f = redis.call('HMGET', lock, 'h' .. m .. ':' .. owner, 'c0', 'c1', 'c2', 'c3', 'c4')
  if not f[1] or string.match(f[1], '^%d+:(.*)$') ~= id then return false end
  local n = 0
  for o = 2, 6 do n = n + tonumber(f[o] or '0') end
  return n == 1 and ((m ~= 1 and m ~= 4) or tonumber(redis.call('ZSCORE', exp, m .. ':' .. owner) or '0') >= clock())
end
-- drop removes hold id from owner's holder in mode m; the last one removes
-- the holder (and the keys, with the last holder; the key's n with the
-- last Limited one) and wakes the waiters it admits. It returns false if
-- id held nothing.
local function drop(lock, exp, q, qx, wake, owner, m, id, now)
  local field = 'h' .. m .. ':' .. owner
  local rec = redis.call('HGET', lock, field)
  if not rec then return false end
  local f, held = string.match(rec, '^(%d+):(.*)$')
  if not has(held, id) then return false end
  local rest = without(held, id)
  if rest ~= '' then
    redis.call('HSET', lock, field, f .. ':' .. rest)
    return true
  end
  redis.call('HDEL', lock, field)
  redis.call('ZREM', exp, m .. ':' .. owner)
  if redis.call('HINCRBY', lock, 'c' .. m, -1) <= 0 then
    if redis.call('ZCARD', exp) == 0 then
      redis.call('DEL', lock, exp)
    elseif m == 4 then
      redis.call('HDEL', lock, 'n')
    end
  end
  announce(lock, exp, q, qx, wake, now)
  return true
end
`

// acquireScript: KEYS lock, exp, queue, qexp, fence counter; ARGV owner,
// mode, ttl ms, call id (the new hold's id), token ("" for TryLock, which
// never queues), Limit (of a Limited request, else 0). Returns {1, fence}
// when held (new or re-entered); {0, ms} when not, ms being how long until
// what refused it lapses; {-1, mode} when the owner holds the key in
// another mode; {-2, mode, n} when holders of mode (of Limit n, if
// Limited) hold the key and either they or the request are Limited
// (driver.Limiter's rule 2).
var acquireScript = goredis.NewScript(`
local m, ttl, token = tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[5]
if redis.call('EXISTS', KEYS[1], KEYS[3]) == 0 then
  -- A key nobody holds or waits for.
  local f = 0
  if m < 2 or m == 4 then
` + rediskey.NextFence("f", "KEYS[5]") + `
  end
  redis.call('HSET', KEYS[1], 'h' .. m .. ':' .. ARGV[1], string.format('%d:%s', f, ARGV[4]), 'c' .. m, 1)
  redis.call('PEXPIRE', KEYS[1], ttl)
  if m ~= 0 then
    local t = redis.call('TIME')
    redis.call('ZADD', KEYS[2], tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + ttl, m .. ':' .. ARGV[1])
    redis.call('PEXPIRE', KEYS[2], ttl)
    if m == 4 then redis.call('HSET', KEYS[1], 'n', ARGV[6]) end
  end
  return {1, f}
end
` + ids + prelude + `
local now, n = now_ms(), tonumber(ARGV[6])
local no, field, rec = try(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], m, token, ttl, now, n)
if no then
  if no[1] == 0 and token ~= '' then enqueue(KEYS[3], KEYS[4], token, now, ttl, ARGV[1], m, n) end
  return no
end
return {1, grant(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1], m, ARGV[4], token, ttl, now, field, rec, n)}
`)

// exclusiveScript is acquireScript for an exclusive request, whose every
// holder and waiter ahead excludes it: the rule needs the holder counts,
// the owner's own records and the queue's head, in few server calls and
// no Lua helpers on its way (each costs the server time at every call).
// Limited holders (c4, h4 read last) make it a mismatch for any owner.
var exclusiveScript = goredis.NewScript(`
local ttl, token, o = tonumber(ARGV[3]), ARGV[5], ARGV[1]
if redis.call('EXISTS', KEYS[1], KEYS[3]) > 0 then
  local f = redis.call('HMGET', KEYS[1], 'c0', 'c1', 'c2', 'c3', 'h0:' .. o, 'h1:' .. o, 'h2:' .. o, 'h3:' .. o, 'c4', 'h4:' .. o)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if f[2] or f[3] or f[4] or f[9] then -- other modes' holders lapse by exp: evict those that did
    local lapsed = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. now)
    for _, m in ipairs(lapsed) do
      if redis.call('HDEL', KEYS[1], 'h' .. m) == 1 then
        local c = string.sub(m, 1, 1)
        if redis.call('HINCRBY', KEYS[1], 'c' .. c, -1) <= 0 and c == '4' then redis.call('HDEL', KEYS[1], 'n') end
      end
      redis.call('ZREM', KEYS[2], m)
    end
    if #lapsed > 0 then
      f = redis.call('HMGET', KEYS[1], 'c0', 'c1', 'c2', 'c3', 'h0:' .. o, 'h1:' .. o, 'h2:' .. o, 'h3:' .. o, 'c4', 'h4:' .. o)
    end
  end
  for m = 1, 3 do
    if f[m + 5] then return {-1, m} end
  end
  if f[10] then return {-1, 4} end
  if tonumber(f[9] or '0') > 0 then return {-2, 4, tonumber(redis.call('HGET', KEYS[1], 'n') or '0')} end
  if f[5] then -- re-entry
    local fence, held = string.match(f[5], '^(%d+):(.*)$')
    if not string.find(' ' .. held .. ' ', ' ' .. ARGV[4] .. ' ', 1, true) then
      redis.call('HSET', KEYS[1], 'h0:' .. o, fence .. ':' .. held .. ' ' .. ARGV[4])
    end
    if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
    if token ~= '' then
      redis.call('ZREM', KEYS[3], token)
      redis.call('HDEL', KEYS[4], token, 'i' .. token)
    end
    return {1, tonumber(fence)}
  end
  local refusal
  if tonumber(f[1] or '0') + tonumber(f[2] or '0') + tonumber(f[3] or '0') + tonumber(f[4] or '0') > 0 then
    local left = redis.call('PTTL', KEYS[1])
    refusal = {0, left >= 0 and left or ttl}
  else
    while true do -- every waiter ahead excludes an exclusive request
      local head = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
      if not head or head == token then break end
      local exp = tonumber(redis.call('HGET', KEYS[4], head) or '0')
      if exp > now then
        refusal = {0, exp - now}
        break
      end
      redis.call('ZREM', KEYS[3], head)
      redis.call('HDEL', KEYS[4], head, 'i' .. head)
    end
  end
  if refusal then -- keep the place, a newcomer's after every waiter (see enqueue)
    if token ~= '' then
      local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')[2]
      redis.call('ZADD', KEYS[3], 'NX', math.max(now, tonumber(last or '0') + 1), token)
      redis.call('HSET', KEYS[4], token, now + ttl, 'i' .. token, ttl .. ' ' .. o)
    end
    return refusal
  end
  if token ~= '' then
    redis.call('ZREM', KEYS[3], token)
    redis.call('HDEL', KEYS[4], token, 'i' .. token)
  end
end
local fence
` + rediskey.NextFence("fence", "KEYS[5]") + `
redis.call('HSET', KEYS[1], 'h0:' .. o, string.format('%d:%s', fence, ARGV[4]), 'c0', 1)
redis.call('PEXPIRE', KEYS[1], ttl)
return {1, fence}
`)

// batchScript: KEYS fence counter, then lock, exp, queue, qexp of each
// request; ARGV owner, ttl ms, Limit (of the Limited requests, else 0),
// then mode and call id of each. Grants every request or none, none
// queueing: {1, fence...}; {0, i, ms} when request i (from 1) was refused;
// {-1, i, mode} or {-2, i, mode, n} on a mismatch (see acquireScript).
var batchScript = goredis.NewScript(ids + prelude + `
local owner, ttl, lim, n = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), (#KEYS - 1) / 4
local now = now_ms()
-- Keys nobody holds or waits for (all of them, commonly: one EXISTS
-- tells) are granted fresh; the others by the general rule.
local joins, any = {}, busy(2, 2)
for i = 1, n do
  local k = 1 + (i - 1) * 4
  local m = tonumber(ARGV[2 + 2 * i])
  if any and redis.call('EXISTS', KEYS[k + 1], KEYS[k + 3]) > 0 then
    local no, field, rec = try(KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4], owner, m, '', ttl, now, lim)
    if no then return {no[1], i, no[2], no[3]} end
    joins[i] = {field, rec}
  end
end
local fences = {1}
for i = 1, n do
  local k, m, id = 1 + (i - 1) * 4, tonumber(ARGV[2 + 2 * i]), ARGV[3 + 2 * i]
  if joins[i] then
    fences[i + 1] = grant(KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4], KEYS[1], owner,
      m, id, '', ttl, now, joins[i][1], joins[i][2], lim)
  else
    fences[i + 1] = fresh(KEYS[k + 1], KEYS[k + 2], KEYS[1], owner, m, id, ttl, now, lim)
  end
end
return fences
`)

// releaseScript: KEYS lock, exp, queue, qexp, fence counter; ARGV owner,
// mode, hold id, wake channel prefix. Drops that hold (see drop): 1 if it
// was there, 0 if not; {1, token, fence} where the last exclusive hold
// went to an exclusive waiter, so that a waiter of the releasing process
// is handed its grant as the reply comes (handOver), not when the
// message does. A release that lets the key go hands it over to
// the waiters it admits: the last exclusive hold to an exclusive waiter
// first, or to the run of readers at the head; the last hold of other
// modes (announce) to an exclusive waiter first; a Limited hold to the
// Limited waiters at the head that the slots left admit. It grants each the key
// (its TTL and owner from its queue entry, a fence drawn now) and
// publishes "g <token> <fence>", so that the waiter holds it without a
// call of its own (see subscriber.handed). A waiter whose entry says
// nothing (an intention mode's; an owner holding the key already) is woken
// and looks itself.
var releaseScript = goredis.NewScript(ids + `
if ARGV[2] == '0' then
  -- An exclusive holder, alone: its last hold deletes the lock.
  local field = 'h0:' .. ARGV[1]
  local rec = redis.call('HGET', KEYS[1], field)
  if not rec then return 0 end
  local f, held = string.match(rec, '^(%d+):(.*)$')
  local rest = ''
  if held ~= ARGV[3] then -- held more than once (WithOwner)
    if not has(held, ARGV[3]) then return 0 end
    rest = without(held, ARGV[3])
  end
  if rest ~= '' then
    redis.call('HSET', KEYS[1], field, f .. ':' .. rest)
    return 1
  end
  redis.call('DEL', KEYS[1], KEYS[2])
  if redis.call('EXISTS', KEYS[3]) == 0 then return 1 end
  -- The lock is gone: wake the waiters at the head that may hold it
  -- together (announce's walk, for no holders, without its helpers).
` + notifyLua + `
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local matrix, seen, i, keep, readers, to = '0000001100011100011000000', {}, 0, 0, false, 1
  while true do
    local w = redis.call('ZRANGE', KEYS[3], i, i)[1]
    if not w then break end
    local x = redis.call('HMGET', KEYS[4], w, 'i' .. w)
    local m, ok = tonumber(string.sub(w, -1)), true
    for s in pairs(seen) do
      ok = ok and string.byte(matrix, m * 5 + s + 1) == 49
    end
    local ttl, owner = string.match(x[2] or '', '^(%d+) (.*)$')
    if tonumber(x[1] or '0') <= now then
      redis.call('ZREM', KEYS[3], w)
      redis.call('HDEL', KEYS[4], w, 'i' .. w)
    elseif ok and ttl and (m == 0 or (m == 1 and redis.call('HEXISTS', KEYS[1], 'h1:' .. owner) == 0)) then
      -- hand it the key: an exclusive waiter first (alone: the lock was
      -- deleted, and the walk ends with it), or a reader the waiters
      -- handed it before admit (an owner holding it already looks)
      local f
` + rediskey.NextFence("f", "KEYS[5]") + `
      local id, fs = string.match(w, '^(.*):%d$'), string.format('%d', f)
      if m == 0 then
        redis.call('HSET', KEYS[1], 'h0:' .. owner, fs .. ':' .. id, 'c0', 1)
      else
        redis.call('HSET', KEYS[1], 'h1:' .. owner, fs .. ':' .. id)
        redis.call('HINCRBY', KEYS[1], 'c1', 1)
        redis.call('ZADD', KEYS[2], now + tonumber(ttl), '1:' .. owner)
        readers = true
      end
      keep = math.max(keep, tonumber(ttl))
      redis.call('ZREM', KEYS[3], w)
      redis.call('HDEL', KEYS[4], w, 'i' .. w)
      notify(ARGV[4], w, 'g ' .. w .. ' ' .. fs)
      if m == 0 then
        to = {1, w, fs}
        break
      end
      seen[m] = true
    else
      if ok then notify(ARGV[4], w, w) end
      if m == 0 then break end
      seen[m], i = true, i + 1
    end
  end
  if keep > 0 then
    redis.call('PEXPIRE', KEYS[1], keep)
    if readers then redis.call('PEXPIRE', KEYS[2], keep) end
  end
  return to
end
` + prelude + `
local m = tonumber(ARGV[2])
-- The only hold, and nobody waits: the keys go (see alone).
if redis.call('EXISTS', KEYS[3]) == 0 and alone(KEYS[1], KEYS[2], ARGV[1], m, ARGV[3], now_ms) then
  redis.call('DEL', KEYS[1], KEYS[2])
  return 1
end
local now = now_ms()
evict(KEYS[1], KEYS[2], now)
handfence = KEYS[5]
if drop(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[4], ARGV[1], m, ARGV[3], now) then return 1 end
return 0
`)

// releaseBatchScript: KEYS lock, exp, queue, qexp of each hold; ARGV wake
// channel prefix, then owner, mode and hold id of each. Drops the holds in
// order (see drop): 1 for each that was there, 0 for each that was not.
var releaseBatchScript = goredis.NewScript(ids + prelude + `
local now
local function clock() -- read once, if at all (TIME costs the most)
  now = now or now_ms()
  return now
end
-- Where nobody waits on any of the keys (one EXISTS tells), a key whose
-- only hold is ours goes, with the others so, in one DEL at the end.
local out, gone, waiters = {}, {}, busy(3, 4)
for i = 1, #KEYS / 4 do
  local k, a = (i - 1) * 4, 2 + (i - 1) * 3
  local m = tonumber(ARGV[a + 1])
  if not waiters and alone(KEYS[k + 1], KEYS[k + 2], ARGV[a], m, ARGV[a + 2], clock) then
    gone[#gone + 1], gone[#gone + 2] = KEYS[k + 1], KEYS[k + 2]
    out[i] = 1
  else
    evict(KEYS[k + 1], KEYS[k + 2], clock())
    out[i] = drop(KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4], ARGV[1], ARGV[a], m, ARGV[a + 2], clock()) and 1 or 0
  end
end
for j = 1, #gone, 1000 do redis.call('DEL', unpack(gone, j, math.min(j + 999, #gone))) end
return out
`)

// refreshOne renews one hold (see refreshScript); clock reads the time,
// once per script.
const refreshOne = `
local function refresh(lock, exp, owner, mode, ttl, id, clock)
  local member = mode .. ':' .. owner
  local rec = redis.call('HGET', lock, 'h' .. member)
  if not rec or not has(string.match(rec, '^%d+:(.*)$'), id) then return 0 end
  if mode ~= '0' then
    local now = clock()
    if tonumber(redis.call('ZSCORE', exp, member) or '0') < now then return 0 end
    redis.call('ZADD', exp, 'GT', now + ttl, member)
  end
  if redis.call('PTTL', lock) < ttl then
    redis.call('PEXPIRE', lock, ttl)
    redis.call('PEXPIRE', exp, ttl)
  end
  return 1
end
local now
local function clock()
  if not now then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return now
end
`

// refreshScript: KEYS lock, exp; ARGV owner, mode, ttl ms, hold id: 1 if
// the hold is there and live, 0 if not. Never shortens the expiry another
// hold of the holder set.
var refreshScript = goredis.NewScript(ids + refreshOne + `
return refresh(KEYS[1], KEYS[2], ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], clock)
`)

// refreshBatchScript: KEYS lock, exp of each hold; ARGV owner, mode, ttl
// ms and hold id of each. Renews each (see refreshScript): 1 or 0 each.
var refreshBatchScript = goredis.NewScript(ids + refreshOne + `
local out = {}
for i = 1, #KEYS / 2 do
  local a = (i - 1) * 4
  out[i] = refresh(KEYS[2 * i - 1], KEYS[2 * i], ARGV[a + 1], ARGV[a + 2], tonumber(ARGV[a + 3]), ARGV[a + 4], clock)
end
return out
`)

// abandonScript: KEYS lock, exp, queue, qexp; ARGV owner, mode, call id,
// token, wake channel prefix. A failed call leaves the queue and takes
// back its hold, if any; the waiters it may have kept out are woken.
var abandonScript = goredis.NewScript(ids + prelude + `
local now = now_ms()
leave(KEYS[3], KEYS[4], ARGV[4])
evict(KEYS[1], KEYS[2], now)
if not drop(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[5], ARGV[1], tonumber(ARGV[2]), ARGV[3], now) then
  announce(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[5], now)
end
return 1
`)

// forceScript: KEYS lock, exp, queue, qexp; ARGV wake channel prefix.
// Drops every S, X and L holder: 1 if there was one, else 0.
var forceScript = goredis.NewScript(ids + prelude + `
local now = now_ms()
evict(KEYS[1], KEYS[2], now)
local dropped = 0
for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
  local m = string.sub(f, 2, 2)
  if string.sub(f, 1, 1) == 'h' and (m == '0' or m == '1' or m == '4') then
    redis.call('HDEL', KEYS[1], f)
    redis.call('ZREM', KEYS[2], string.sub(f, 2))
    redis.call('HINCRBY', KEYS[1], 'c' .. m, -1)
    dropped = 1
  end
end
redis.call('HDEL', KEYS[1], 'n')
if redis.call('ZCARD', KEYS[2]) == 0 then redis.call('DEL', KEYS[1], KEYS[2]) end
announce(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], now)
return dropped
`)

// statusScript: KEYS lock, exp, queue. Replies {waiters, the Limit of the
// L holders (0 if none), then per S, X or L holder: mode, owner, fence,
// holds, ms left}.
var statusScript = goredis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {redis.call('ZCARD', KEYS[3]), tonumber(redis.call('HGET', KEYS[1], 'n') or '0')}
for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
  local m = string.sub(f, 2, 2)
  if string.sub(f, 1, 1) == 'h' and (m == '0' or m == '1' or m == '4') then
    local left = redis.call('PTTL', KEYS[1])
    if m ~= '0' then left = tonumber(redis.call('ZSCORE', KEYS[2], string.sub(f, 2)) or '0') - now end
    if left >= 0 then -- lapsed once the clock has passed it (see exp)
      local fence, held = string.match(redis.call('HGET', KEYS[1], f), '^(%d+):(.*)$')
      local holds = 0
      for _ in string.gmatch(held, '%S+') do holds = holds + 1 end
      out[#out + 1] = tonumber(m)
      out[#out + 1] = string.sub(f, 4)
      out[#out + 1] = tonumber(fence)
      out[#out + 1] = holds
      out[#out + 1] = left
    end
  end
end
return out
`)
