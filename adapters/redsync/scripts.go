package redsync

import (
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker/internal/rediskey"
)

// The per-master steps, as Lua scripts; names.go lists a key's records.
//
// A holder is an owner in one mode, with three anchor fields: f<m><owner>
// its fence (0 for an intention holder: its fence is never a lease's, so
// none is drawn for it), h<m><owner> its holds (",id,id,": one per lease, named by the
// attempt that added it, so that a retried release, or the undo of an
// attempt whose reply was lost, drops the hold it names and never
// another) and a<m><owner> the attempt that created it (named in its
// release's news). Its expiry (ms, by the master's clock) is a score in
// its mode's sorted set; the Exclusive holder, the only one of its mode,
// is the anchor's x (owner) and xe (expiry) instead, so that the plain
// lock costs one Redis key, as before.
//
// The anchor's other fields: o = "" (what an old version reads as the
// owner: see the package doc), L the largest fence given on the key
// (which makes a fence claimed by one grant unclaimable by another: see
// claimScript), w, set while the key may have waiting marks (marks.go), z
// the modes that may have holders in a sorted set, and N the Limit of its
// Limited holders (limit.go), read as theirs only while one of them is
// live (else it is the last ones', a hint for the wakes: nextWaiter).
// Whatever is lapsed is evicted as it is met; every key expires (PEXPIRE)
// after the last of its entries, and the anchor after all of them.

// luaNow is what every script begins with: the master's clock in ms.
const luaNow = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`

// luaCountFence: countFence() draws the next fence of the counter
// KEYS[1], at least the floor ARGV[1] (the largest counter the client
// saw, plus one: a lagging master catches up), a missing counter started
// from the clock (rediskey.NextFence).
var luaCountFence = `
local function countFence()
` + luaNextFence + `
  return c
end
`

// luaNextFence sets the local c to countFence's fence, inline.
var luaNextFence = `
  local c
` + rediskey.NextFence("c", "KEYS[1]") + `
  if c < tonumber(ARGV[1]) then
    c = tonumber(ARGV[1])
    redis.call('SET', KEYS[1], c)
  end
`

// luaHelpers are the scripts' helpers. A script defines them after its
// fast path, if it has one: making them costs every run that does.
const luaHelpers = `
-- keep makes k outlive an entry just stored in it for ttl ms.
local function keep(k, ttl)
  if redis.call('PTTL', k) < ttl then
    redis.call('PEXPIRE', k, ttl)
  end
end
-- alive is score s as a number if it is an expiry still to come.
local function alive(s)
  if s and tonumber(s) > now then
    return tonumber(s)
  end
  return nil
end
-- tidy deletes anchor H once no holder (none has fields but o, L, w, z
-- and N) and no mark (W, marks by expiry) is left.
local function tidy(H, W)
  local v = redis.call('HMGET', H, 'L', 'w', 'z', 'N')
  local own = 1
  for i = 1, 4 do
    if v[i] then
      own = own + 1
    end
  end
  if redis.call('HLEN', H) == own and (not v[2] or redis.call('EXISTS', W) == 0) then
    redis.call('DEL', H)
  end
end
-- forget deletes owner's holder fields of mode m on anchor H.
local function forget(H, m, owner)
  redis.call('HDEL', H, 'f' .. m .. owner, 'h' .. m .. owner, 'a' .. m .. owner)
end
`

// luaPrelude is luaNow and luaHelpers, for a script without a fast path.
const luaPrelude = luaNow + luaHelpers

// conflicting lists, for each mode, the modes it cannot hold a key beside,
// as acquireScript takes them (driver.Compatible is the one matrix, and
// finds Limited compatible with nothing: a Limited mark before a request
// of another mode refuses it, Limited holders are a mismatch for it, and
// a Limited request reads no conflicts but limit's).
var conflicting = func() [len(modes)]string {
	var c [len(modes)]string
	for _, m := range modes {
		for _, o := range modes {
			if !m.Compatible(o) {
				c[m] += digit(o)
			}
		}
	}
	return c
}()

// Outcomes of acquireScript for one request on one master.
const (
	refused   = 0 // {0, ms until what refused it may lapse, who refused, 1 if an old version's record}
	reentered = 1 // {1, the holder's fence}
	granted   = 2 // {2, the counter drawn}
	mismatch  = 3 // the owner holds the key in another mode
	heldBack  = 4 // grantable, but another request of the batch was refused
	misLimit  = 5 // {5, the mode held, its Limit if Limited}: driver.Limiter's rule 2, whoever the owner
)

// replyWidth is how many integers acquireScript replies per request.
const replyWidth = 4

// acquireScript decides a batch of requests by driver.ModeKeeper's rule,
// all or none (acquireLua). KEYS: the fence counter, then each request's
// records. ARGV: the counter floor (the largest counter the client saw,
// plus one: a lagging master catches up), then per request requestArgs:
// owner, mode, ttl ms, hold id, reentrant (1 for a WithOwner owner),
// queue (0: not queued; 1: queued, its place the stamp; 2: also
// (re)place its waiting mark if refused), call id, stamp (the call's
// place among waiters), the modes it conflicts with, its Limit (if
// Limited), hand-off (a driver id: a refusal records the hold id as the
// one a release may hand its mark, and tells that driver; "": none; see
// handoff.go). Replies replyWidth integers per request, then the counter (0
// if no grant read it).
var acquireScript = goredis.NewScript(acquireLua)

// acquireRefused is the general path's work (decide, conflicts, mark,
// pend) for one Exclusive request that its key's live Exclusive holder,
// of another owner, refuses, no holders of other modes beside it (the
// anchor's z), and no re-entry asked: the waiter's turn at the hand-off's
// path, each time the key changes hands, with none of the helpers that
// the general path makes at every run. It reads and evicts as
// conflicts's heads do, and places the mark and the pending hold as mark
// and pend do (the mark just placed needs no look).
const acquireRefused = `
if #ARGV == 1 + RA and first.o == '' and ARGV[3] == '0' and ARGV[6] ~= '1' and first.z == '' and
  first.x and first.x ~= ARGV[2] and first.xe and tonumber(first.xe) > now and string.sub(ARGV[10], 1, 1) == '0' then
  local H, W, P, ttl, call = KEYS[2], KEYS[7], KEYS[13], tonumber(ARGV[4]), ARGV[8]
  local queued, stamp = ARGV[7] ~= '0', tonumber(ARGV[9])
  local wait, who = tonumber(first.xe) - now, tonumber(first.xa or '0') or 0
  for i = 1, #ARGV[10] do
    local m = string.sub(ARGV[10], i, i)
    while string.find(first.w, m, 1, true) do -- head's: the first live mark of mode m
      local Q = KEYS[8 + tonumber(m)]
      local h = redis.call('ZRANGE', Q, 0, 0, 'WITHSCORES')
      if not h[1] then
        break
      end
      local e = redis.call('ZSCORE', W, m .. h[1])
      if e and tonumber(e) > now then
        local st = tonumber(h[2])
        if not queued or st < stamp or (st == stamp and h[1] < call) then
          wait = math.max(wait, tonumber(e) - now)
        end
        break
      end
      redis.call('ZREM', Q, h[1])
      redis.call('ZREM', W, m .. h[1])
      redis.call('HDEL', P, h[1])
    end
  end
  local marked = ARGV[7] == '2'
  if marked then
    if not string.find(first.w, '0', 1, true) then
      redis.call('HSET', H, 'w', first.w .. '0')
    end
    redis.call('ZADD', KEYS[8], ARGV[9], call)
    redis.call('ZADD', W, now + ttl, '0' .. call)
    for _, k in ipairs({H, W, KEYS[8]}) do
      if redis.call('PTTL', k) < ttl then
        redis.call('PEXPIRE', k, ttl)
      end
    end
  end
  if ARGV[12] ~= '' and (marked or redis.call('ZSCORE', KEYS[8], call)) then
    redis.call('HSET', P, call, ARGV[5] .. ' ' .. ttl .. ' ' .. now .. ' ' .. ARGV[12] .. ' ' .. ARGV[2])
    if redis.call('PTTL', P) < ttl then
      redis.call('PEXPIRE', P, ttl)
    end
  end
  return {0, wait, who, 0, 0}
end
`

// requestArgs is how many ARGV acquireScript takes per request.
const requestArgs = 11

// acquireLua: who refused is named by the attempt id of the X holder's
// creator or of an old version's record; the holders of mode m by -(1+m),
// the marks of mode m by -(5+m), Limited holders by -10: each counts as
// one contender when votes are sorted. A key whose anchor has an owner is an old version's record
// (package doc): held exclusively by it, never marked. A random owner
// meeting its own live Exclusive holder (a hand-off it did not hear of,
// or an earlier attempt's lost undo) is granted afresh, whatever marks
// stand before it: they came after the key was the call's here, and were
// it dropped and the call refused, the key would lie free with nobody
// told. (Its own slot is dropped and the request decided again: slots
// go in the marks' order, and a call keeping its slot behind earlier
// marks would pass slots round the waiters, none holding on quorumOf's
// count of masters.) Marks are ordered by the stamp the client chose, the same on
// every master, so that two waiters stand in one order everywhere and
// cannot each be first on a minority for ever.
var acquireLua = luaNow + luaCountFence + `
local RK, RA = ` + strconv.Itoa(recordKeys) + `, ` + strconv.Itoa(requestArgs) + `
local last, joined
local function count()
  last = countFence()
  return last
end
-- anchor reads the anchor of the request whose keys begin after KEYS[k].
local function anchor(k)
  local v = redis.call('HMGET', KEYS[k + 1], 'o', 'x', 'xe', 'xa', 'w', 'z', 'L')
  return {o = v[1], x = v[2], xe = v[3], xa = v[4], w = v[5] or '', z = v[6] or '', L = tonumber(v[7] or '0')}
end
-- The fast path: one request for a key that has no anchor, nor so
-- anything else: granted at once.
local first = anchor(1)
if #ARGV == 1 + RA and not first.o then
  local owner, m, ttl, id = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
  local c, mo = 0, m .. owner
  if m < 2 or m == 4 then
    c = count()
  end
  if m == 0 then
    redis.call('HSET', KEYS[2], 'o', '', 'f' .. mo, c, 'h' .. mo, ',' .. id .. ',', 'a' .. mo, id, 'L', c,
      'x', owner, 'xe', now + ttl, 'xa', id)
  else
    redis.call('HSET', KEYS[2], 'o', '', 'f' .. mo, c, 'h' .. mo, ',' .. id .. ',', 'a' .. mo, id, 'L', c, 'z', m)
    if m == 4 then
      redis.call('HSET', KEYS[2], 'N', ARGV[11])
    end
    redis.call('ZADD', KEYS[2 + m], now + ttl, owner)
    redis.call('PEXPIRE', KEYS[2 + m], ttl)
  end
  redis.call('PEXPIRE', KEYS[2], ttl)
  return {2, c, 0, 0, last or 0}
end
` + acquireRefused + luaHelpers + `
-- A request's keys: anchor KEYS[k+1], mode m's holders KEYS[k+1+m]
-- (m > 0), marks by expiry KEYS[k+6], mode m's marks KEYS[k+7+m], the
-- holds marks wait to be handed KEYS[k+12]. s is
-- its anchor as read: s.z lists the modes that may have holders in a
-- sorted set, s.w those that may have marks (the anchor's z and w).
local function has(set, m)
  return string.find(set, m, 1, true) ~= nil
end
local function drop(k, m, owner)
  forget(KEYS[k + 1], m, owner)
  if m == 0 then
    redis.call('HDEL', KEYS[k + 1], 'x', 'xe', 'xa')
  else
    redis.call('ZREM', KEYS[k + 1 + m], owner)
  end
end
-- evict drops lapsed holders and marks, before a grant writes.
local function evict(k, s)
  if s.x and not alive(s.xe) then
    drop(k, 0, s.x)
  end
  local z = s.z
  for i = 1, #s.z do
    local m = tonumber(string.sub(s.z, i, i))
    local gone = redis.call('ZRANGEBYSCORE', KEYS[k + 1 + m], '-inf', now, 'LIMIT', 0, 100)
    for _, h in ipairs(gone) do
      drop(k, m, h)
    end
    if #gone > 0 and redis.call('EXISTS', KEYS[k + 1 + m]) == 0 then
      z = string.gsub(z, m, '')
    end
  end
  if z ~= s.z then
    redis.call('HSET', KEYS[k + 1], 'z', z)
    s.z = z
  end
  if s.w ~= '' then
    for _, w in ipairs(redis.call('ZRANGEBYSCORE', KEYS[k + 6], '-inf', now, 'LIMIT', 0, 100)) do
      redis.call('ZREM', KEYS[k + 7 + tonumber(string.sub(w, 1, 1))], string.sub(w, 2))
      redis.call('ZREM', KEYS[k + 6], w)
      redis.call('HDEL', KEYS[k + 12], string.sub(w, 2))
    end
    if redis.call('EXISTS', KEYS[k + 6]) == 0 then
      redis.call('HDEL', KEYS[k + 1], 'w')
      s.w = ''
    end
  end
end
-- holds: whether owner's holder in mode m is live.
local function holds(k, s, m, owner)
  if m == 0 then
    return s.x == owner and alive(s.xe) ~= nil
  end
  return has(s.z, m) and alive(redis.call('ZSCORE', KEYS[k + 1 + m], owner)) ~= nil
end
-- head is the first live mark of mode m: call id, stamp, expiry.
local function head(k, m)
  local Q, W = KEYS[k + 7 + m], KEYS[k + 6]
  while true do
    local h = redis.call('ZRANGE', Q, 0, 0, 'WITHSCORES')
    if not h[1] then
      return nil
    end
    local exp = alive(redis.call('ZSCORE', W, m .. h[1]))
    if exp then
      return h[1], tonumber(h[2]), exp
    end
    redis.call('ZREM', Q, h[1])
    redis.call('ZREM', W, m .. h[1])
    redis.call('HDEL', KEYS[k + 12], h[1])
  end
end
-- conflicts is rule 3: who of the live holders and earlier marks refuses
-- the request, and for how long at most; nil if nobody does.
local function conflicts(k, a, s)
  local queued, call, stamp, modes = ARGV[a + 6] ~= '0', ARGV[a + 7], tonumber(ARGV[a + 8]), ARGV[a + 9]
  local wait, who = 0, nil
  for i = 1, #modes do
    local m = tonumber(string.sub(modes, i, i))
    if m == 0 and s.x and alive(s.xe) then
      wait, who = tonumber(s.xe) - now, tonumber(s.xa or '0') or 0
    elseif m > 0 and has(s.z, m) then
      local top = redis.call('ZRANGE', KEYS[k + 1 + m], -1, -1, 'WITHSCORES')
      if alive(top[2]) then
        wait, who = math.max(wait, tonumber(top[2]) - now), who or -(1 + m)
      end
    end
    if has(s.w, m) then
      local id, st, exp = head(k, m)
      if id and (not queued or st < stamp or (st == stamp and id < call)) then
        wait, who = math.max(wait, exp - now), who or -(5 + m)
      end
    end
  end
  return who, wait
end
` + luaLimit + `
local function decide(k, a, s)
  if s.o and s.o ~= '' then
    s.v = {0, redis.call('PTTL', KEYS[k + 1]), tonumber(redis.call('HGET', KEYS[k + 1], 'a') or '0') or 0, 1}
    return
  elseif not s.o then
    s.v, s.fresh = {2}, true
    return
  end
  local owner, mode = ARGV[a + 1], tonumber(ARGV[a + 2])
  if ARGV[a + 5] == '1' then
    for m = 0, 4 do
      if holds(k, s, m, owner) then
        s.v = {m == mode and 1 or 3}
        return
      end
    end
  elseif (mode == 0 and s.x == owner) or (mode > 0 and has(s.z, mode) and redis.call('ZSCORE', KEYS[k + 1 + mode], owner)) then
    local live = mode == 0 and alive(s.xe) ~= nil
    drop(k, mode, owner)
    if mode == 0 then
      s.x = nil
    end
    if live then
      s.v = {2}
      return
    end
  end
  s.v = limit(k, a, s, mode)
  if s.v then
    return
  end
  local who, wait = conflicts(k, a, s)
  if who then
    s.v = {0, wait, who, 0}
  else
    s.v = {2}
  end
end
-- join adds the request's hold to its owner's holder, lengthened to its
-- TTL if it was shorter.
local function join(k, a, s)
  local H, owner, m, id = KEYS[k + 1], ARGV[a + 1], tonumber(ARGV[a + 2]), ARGV[a + 4]
  local ttl, mo = tonumber(ARGV[a + 3]), m .. owner
  local v = redis.call('HMGET', H, 'h' .. mo, 'f' .. mo)
  local hs = v[1] or ','
  if not string.find(hs, ',' .. id .. ',', 1, true) then
    redis.call('HSET', H, 'h' .. mo, hs .. id .. ',')
  end
  if m == 0 then
    redis.call('HSET', H, 'xe', math.max(now + ttl, tonumber(s.xe)))
  else
    redis.call('ZADD', KEYS[k + 1 + m], 'GT', now + ttl, owner)
    keep(KEYS[k + 1 + m], ttl)
  end
  keep(H, ttl)
  joined = true
  return {1, tonumber(v[2] or '0'), 0, 0}
end
local function grant(k, a, s)
  local H, owner, m, ttl, id = KEYS[k + 1], ARGV[a + 1], tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), ARGV[a + 4]
  if not s.fresh then
    evict(k, s)
  end
  if ARGV[a + 6] ~= '0' and has(s.w, m) and redis.call('ZREM', KEYS[k + 7 + m], ARGV[a + 7]) == 1 then
    redis.call('ZREM', KEYS[k + 6], m .. ARGV[a + 7])
    redis.call('HDEL', KEYS[k + 12], ARGV[a + 7])
  end
  if s.v[1] == 1 then
    return join(k, a, s)
  end
  local c, mo = 0, m .. owner
  if m < 2 or m == 4 then
    c = count()
  end
  if m == 4 then
    redis.call('HSET', H, 'N', ARGV[a + 10])
  end
  if m == 0 then
    redis.call('HSET', H, 'o', '', 'f' .. mo, c, 'h' .. mo, ',' .. id .. ',', 'a' .. mo, id, 'L', math.max(c, s.L),
      'x', owner, 'xe', now + ttl, 'xa', id)
  else
    local z = s.z
    if not has(z, m) then
      z = z .. m
    end
    redis.call('HSET', H, 'o', '', 'f' .. mo, c, 'h' .. mo, ',' .. id .. ',', 'a' .. mo, id, 'L', math.max(c, s.L), 'z', z)
    redis.call('ZADD', KEYS[k + 1 + m], now + ttl, owner)
  end
  if s.fresh then
    redis.call('PEXPIRE', H, ttl)
    if m > 0 then
      redis.call('PEXPIRE', KEYS[k + 1 + m], ttl)
    end
  else
    keep(H, ttl)
    if m > 0 then
      keep(KEYS[k + 1 + m], ttl)
    end
  end
  return {2, c, 0, 0}
end
-- mark places or renews the request's waiting mark, if asked (queue 2).
local function mark(k, a, s)
  local H, W, m, ttl, call = KEYS[k + 1], KEYS[k + 6], tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), ARGV[a + 7]
  local Q = KEYS[k + 7 + m]
  if not has(s.w, m) then
    redis.call('HSET', H, 'w', s.w .. m)
  end
  redis.call('ZADD', Q, ARGV[a + 8], call)
  redis.call('ZADD', W, now + ttl, m .. call)
  keep(H, ttl)
  keep(W, ttl)
  keep(Q, ttl)
end
-- pend records, for a refused request that asks it (a hand-off driver
-- id) and has a mark here, the hold a release may hand it: "<hold id>
-- <ttl> <now> <driver id> <owner>" (see handoff in holdscripts.go).
local function pend(k, a)
  local P, ttl = KEYS[k + 12], tonumber(ARGV[a + 3])
  if redis.call('ZSCORE', KEYS[k + 7 + tonumber(ARGV[a + 2])], ARGV[a + 7]) then
    redis.call('HSET', P, ARGV[a + 7], ARGV[a + 4] .. ' ' .. ttl .. ' ' .. now .. ' ' .. ARGV[a + 11] .. ' ' .. ARGV[a + 1])
    keep(P, ttl)
  end
end
local n = (#ARGV - 1) / RA
local ss, all = {}, true
for i = 0, n - 1 do
  local s = first
  if i > 0 then
    s = anchor(1 + i * RK)
  end
  decide(1 + i * RK, 1 + i * RA, s)
  ss[i + 1] = s
  all = all and (s.v[1] == 1 or s.v[1] == 2)
end
local out = {}
for i = 0, n - 1 do
  local k, a, v = 1 + i * RK, 1 + i * RA, ss[i + 1].v
  local r
  if all then
    r = grant(k, a, ss[i + 1])
  elseif v[1] == 0 then
    if ARGV[a + 6] == '2' and v[4] == 0 then
      mark(k, a, ss[i + 1])
    end
    if ARGV[a + 11] ~= '' and v[4] == 0 then
      pend(k, a)
    end
    r = v
  elseif v[1] == 3 then
    r = {3, 0, 0, 0}
  elseif v[1] == 5 then
    r = v
  else
    r = {4, 0, 0, 0}
  end
  for _, x in ipairs(r) do
    out[#out + 1] = x
  end
end
if joined and not last then
  last = tonumber(redis.call('GET', KEYS[1]) or '0')
end
out[#out + 1] = last or 0
return out
`
