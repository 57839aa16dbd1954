package redsync

import goredis "github.com/redis/go-redis/v9"

// The scripts of a granted hold and of a waiting mark. A hold's scripts
// take KEYS anchor and its mode's holders (unused for Exclusive, whose
// holder is in the anchor).

// luaHolder reads owner's holder of mode m: its fields hv (holds, fence,
// creator) and whether it is live.
const luaHolder = `
local function holder(H, Z, m, owner)
  local mo = m .. owner
  local v = redis.call('HMGET', H, 'h' .. mo, 'f' .. mo, 'a' .. mo, 'x', 'xe', 'L')
  local live
  if m == '0' then
    live = v[4] == owner and alive(v[5]) ~= nil
  else
    live = v[1] ~= false and alive(redis.call('ZSCORE', Z, owner)) ~= nil
  end
  return v, live
end
`

// claimScript: KEYS anchor, holders, counter; ARGV mode, owner, ttl ms,
// fence, hold id, fresh. Raises the counter to the fence; where the
// holder has our hold and is live, extends it and records the fence:
// {1, L, counter}; else {0, 0, counter}. It is the keep-alive, and the
// second acquire round that makes a fence durable: then (fresh = 1) a
// fence that another grant of the key may have (the key's L is at or
// above it, and it is not already ours) is refused, {2, L, counter}, so
// that two grants that hold the key together (shared ones) never share a
// fence: each claims its own on a quorum, and two quorums meet.
var claimScript = goredis.NewScript(luaPrelude + luaHolder + luaClaim + `
return claim(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5], ARGV[6])
`)

// claimBatchScript is claimScript's keep-alive for many holds at once:
// KEYS counter, then anchor and holders of each hold; ARGV mode, owner,
// ttl ms, fence and hold id of each. Replies, per hold, claimScript's
// first integer (1: extended; 0: not ours).
var claimBatchScript = goredis.NewScript(luaPrelude + luaHolder + luaClaim + `
local out = {}
for i = 1, (#KEYS - 1) / 2 do
  local a = (i - 1) * 5
  out[i] = claim(KEYS[2 * i], KEYS[2 * i + 1], KEYS[1], ARGV[a + 1], ARGV[a + 2], tonumber(ARGV[a + 3]), ARGV[a + 4], ARGV[a + 5], '0')[1]
end
return out
`)

// luaClaim: claim(H, Z, C, m, owner, ttl, fence, id, fresh) is
// claimScript's work for one hold (see there), counter C.
const luaClaim = `
local function claim(H, Z, C, m, owner, ttl, fence_s, id, fresh)
  local fence = tonumber(fence_s)
  local c = tonumber(redis.call('GET', C) or '0')
  if c < fence then
    redis.call('SET', C, fence_s)
    c = fence
  end
  local v, live = holder(H, Z, m, owner)
  if not live or not string.find(v[1] or '', ',' .. id .. ',', 1, true) then
    return {0, 0, c}
  end
  local L = tonumber(v[6] or '0')
  if fresh == '1' and L >= fence and tonumber(v[2] or '0') ~= fence then
    return {2, L, c}
  end
  if m == '0' then
    redis.call('HSET', H, 'f' .. m .. owner, fence_s, 'L', math.max(L, fence), 'xe', math.max(now + ttl, tonumber(v[5])))
  else
    redis.call('HSET', H, 'f' .. m .. owner, fence_s, 'L', math.max(L, fence))
    redis.call('ZADD', Z, 'GT', now + ttl, owner)
    keep(Z, ttl)
  end
  keep(H, ttl)
  return {1, L, c}
end
`

// luaNextWaiter: nextWaiter(H, W, q, Z) is " <stamp> <mode> <call id>" of
// the first live mark of the key (whose marks of mode m are KEYS[q+m]),
// the waiter a release admits first, or "" if there is none: released
// news carries it, so that only the waiters it may admit look again. If
// that mark is Limited it is the last of the Limited marks the free slots
// admit (the key's N less its live Limited holders, Z; nil if none may be
// left): those before it look again too. With no Limited holder left, N
// is its last holders' Limit, a hint (the waiters' is likely the same);
// with no N, "": every waiter looks. firstMark(H, W, q) is that first
// mark as {stamp, mode, call id, stamp as stored}, or nil.
const luaNextWaiter = `
local function lastAdmitted(H, W, Q, Z)
  local live, room = 0, tonumber(redis.call('HGET', H, 'N') or '0') or 0
  if Z then
    live = redis.call('ZCOUNT', Z, '(' .. now, '+inf')
  end
  if room == 0 then
    return nil
  end
  local i, best = 0, nil
  room = room - live
  while room > 0 do
    local h = redis.call('ZRANGE', Q, i, i + 15, 'WITHSCORES')
    if not h[1] then
      break
    end
    for j = 1, #h, 2 do
      if room > 0 and alive(redis.call('ZSCORE', W, '4' .. h[j])) then
        best, room = {tonumber(h[j + 1]), 4, h[j], h[j + 1]}, room - 1
      end
    end
    i = i + 16
  end
  return best
end
local function firstMark(H, W, q)
  local w, best = redis.call('HGET', H, 'w') or '', nil
  for i = 1, #w do
    local m = tonumber(string.sub(w, i, i))
    -- its first live mark among the first few (lapsed ones wait for an
    -- attempt's eviction)
    local h = redis.call('ZRANGE', KEYS[q + m], 0, 7, 'WITHSCORES')
    for j = 1, #h, 2 do
      if alive(redis.call('ZSCORE', W, m .. h[j])) then
        local st = tonumber(h[j + 1])
        if not best or st < best[1] or (st == best[1] and h[j] < best[3]) then
          best = {st, m, h[j], h[j + 1]}
        end
        break
      end
    end
  end
  return best
end
local function nextWaiter(H, W, q, Z)
  local best = firstMark(H, W, q)
  if best and best[2] == 4 then
    local v = lastAdmitted(H, W, KEYS[q + 4], Z)
    if not v then
      return ''
    end
    best = v
  end
  if not best then
    return ''
  end
  return ' ' .. best[4] .. ' ' .. best[2] .. ' ' .. best[3]
end
`

// luaHandoff: handoff(H, W, q, P, ch, news) grants a key that an
// Exclusive holder's release just left free (its anchor H names no mode
// with holders) to its first waiting mark (marks of mode m KEYS[q+m]), if
// that is an Exclusive one that pends a hold in P (acquireScript's pend)
// and was renewed within half its TTL (a live waiter renews it every
// TTL/3: a dead one's is not handed the key, only passed once it lapses):
// the hold it asked for, with a fence counted on KEYS[1] (floor ARGV[1])
// and its TTL from now, its mark gone. The release's news, "<creator id>
// <fence>", with " <stamp> 0 <call id> h <hold id> <counter> <ms since
// the hold was pended>" goes to the waiter's driver alone (ARGV[2] and
// its id), after the key's channel ch, as "<#ch> <ch><news>": no other
// waiter need hear it (they stand behind the one handed the key). It
// returns whether it handed the key (if not, nothing changed).
const luaHandoff = `
local function handoff(H, W, q, P, ch, news)
  local best = firstMark(H, W, q)
  if not best or best[2] ~= 0 then
    return false
  end
  local p = redis.call('HGET', P, best[3])
  local a = redis.call('HMGET', H, 'o', 'z', 'L')
  if not p or a[1] ~= '' or (a[2] and a[2] ~= '') then
    return false
  end
  local id, ttl, at, to, owner = string.match(p, '^(%S+) (%d+) (%d+) (%S+) (.*)$')
  if not id then
    return false
  end
  ttl = tonumber(ttl)
  if tonumber(redis.call('ZSCORE', W, '0' .. best[3])) - now < ttl / 2 then
    return false
  end
  local c = countFence()
  local mo = '0' .. owner
  redis.call('HSET', H, 'f' .. mo, c, 'h' .. mo, ',' .. id .. ',', 'a' .. mo, id,
    'L', math.max(c, tonumber(a[3] or '0')), 'x', owner, 'xe', now + ttl, 'xa', id)
  keep(H, ttl)
  redis.call('ZREM', KEYS[q], best[3])
  redis.call('ZREM', W, '0' .. best[3])
  redis.call('HDEL', P, best[3])
  -- (%d: Lua's own formatting of a number would round a counter started
  -- from the clock)
  redis.call('PUBLISH', ARGV[2] .. to, #ch .. ' ' .. ch .. news .. ' ' .. best[4] .. ' 0 ' .. best[3] ..
    ' h ' .. id .. string.format(' %d %d', c, now - tonumber(at)))
  return true
end
`

// luaHandoffLimited: handoffLimited(H, Z, W, q, P, ch, news) grants the
// slot that a Limited holder's release just freed (its holders Z) to the
// key's first waiting mark, if that is a Limited one that pends a hold in
// P whose driver id carries its Limit, "<driver id>/<n>", renewed within
// half its TTL as handoff's, and the slot is the key's last free one (n
// less one of them left, of that Limit, or none, and no other mode's
// holders): its holder, with a fence, its mark gone, and the news to its
// driver alone, as handoff's. With more slots free, more waiters may go:
// it hands nothing, and the release's news wakes them (nextWaiter).
const luaHandoffLimited = `
local function handoffLimited(H, Z, W, q, P, ch, news)
  local best = firstMark(H, W, q)
  if not best or best[2] ~= 4 then
    return false
  end
  local p = redis.call('HGET', P, best[3])
  local a = redis.call('HMGET', H, 'o', 'x', 'xe', 'N', 'L', 'z')
  if not p or a[1] ~= '' or alive(a[3]) or string.gsub(a[6] or '', '4', '') ~= '' then
    return false
  end
  local id, ttl, at, to, owner = string.match(p, '^(%S+) (%d+) (%d+) (%S+) (.*)$')
  local drv, n = string.match(to or '', '^(%S+)/(%d+)$')
  if not drv then
    return false
  end
  ttl, n = tonumber(ttl), tonumber(n)
  local live = redis.call('ZCOUNT', Z, '(' .. now, '+inf')
  if live ~= n - 1 or (live > 0 and tonumber(a[4]) ~= n) or alive(redis.call('ZSCORE', Z, owner)) or
    tonumber(redis.call('ZSCORE', W, '4' .. best[3])) - now < ttl / 2 then
    return false
  end
  local c = countFence()
  local mo = '4' .. owner
  redis.call('HSET', H, 'f' .. mo, c, 'h' .. mo, ',' .. id .. ',', 'a' .. mo, id,
    'L', math.max(c, tonumber(a[5] or '0')), 'N', n, 'z', '4')
  redis.call('ZADD', Z, now + ttl, owner)
  keep(H, ttl)
  keep(Z, ttl)
  redis.call('ZREM', KEYS[q + 4], best[3])
  redis.call('ZREM', W, '4' .. best[3])
  redis.call('HDEL', P, best[3])
  redis.call('PUBLISH', ARGV[2] .. drv, #ch .. ' ' .. ch .. news .. ' ' .. best[4] .. ' 4 ' .. best[3] ..
    ' h ' .. id .. string.format(' %d %d', c, now - tonumber(at)))
  return true
end
`

// releaseScript drops holds: KEYS the fence counter, then 9 per hold
// (anchor, holders, marks by expiry, marks by mode, pending holds); ARGV
// the counter floor (as acquireScript's), the prefix of hand-off
// channels, then 5 per hold (mode, owner, hold id (or "|id|id|…|": those
// of them the holder has: a call's pended holds, handoff.go), channel
// ("" for silence), call id ("": none) whose mark in the hold's mode goes
// too, if it pends one of the holds listed), and last the quiet flag ("1":
// publish only where a waiter is marked, the undo of an attempt; "0").
// Replies per hold 0 if the holder is
// not live or lacks the hold, 1 if holds remain, 2 when the holder was
// deleted: that publishes "<creator id> <fence>[ <next waiter>]" (see
// news) if no live holder of its mode is left, as only then may a waiter
// be admitted (a Limited holder always: it frees a slot). An Exclusive
// holder's release hands the key to the first waiter there if it can
// (handoff), a Limited one its slot (handoffLimited), and tells that
// waiter's driver alone (the fast path, releaseHandoff, also replies
// {2, driver id, message}, for a driver of the releaser's process:
// handHere). A call's mark
// removed, and no holder, publishes " 0[ <next waiter>]". It is also the
// undo of a failed attempt, whose hold id is the attempt's, and the end
// of a call that waited (Abandon). The last holder of a key without
// marks deletes it outright.
var releaseScript = goredis.NewScript(luaNow + `
-- The fast paths, for one hold: the last hold of a key's only holder,
-- without marks; and an Exclusive holder's last hold whose key goes to
-- the first waiting mark (releaseHandoff).
if #KEYS == 10 then
  local H, Z, m, owner, id = KEYS[2], KEYS[3], ARGV[3], ARGV[4], ARGV[5]
  local mo = m .. owner
  local v = redis.call('HMGET', H, 'h' .. mo, 'x', 'xe', 'a' .. mo, 'f' .. mo, 'w', 'z', 'N', 'o', 'L')
  local live
  if m == '0' then
    live = v[2] == owner and tonumber(v[3]) > now
  else
    local e = redis.call('ZSCORE', Z, owner)
    live = e and tonumber(e) > now
  end
  -- its own fields, with o and L (and z, N)
  local own = 8
  if m ~= '0' then
    own = 5
  end
  if v[7] then
    own = own + 1
  end
  if v[8] then
    own = own + 1
  end
  -- its one hold is id, or one of ids "|id|…|"
  local one = v[1] and string.match(v[1], '^,([^,]+),$')
  local mine = one == id or (one and string.find(id, '|' .. one .. '|', 1, true))
  if live and not v[6] and mine and redis.call('HLEN', H) == own then
    redis.call('DEL', H, Z)
    if ARGV[6] ~= '' and ARGV[#ARGV] ~= '1' then
      redis.call('PUBLISH', ARGV[6], (v[4] or '') .. ' ' .. (v[5] or '0'))
    end
    return {2}
  end
  if live and v[6] and mine and m == '0' and ARGV[6] ~= '' and v[9] == '' and (not v[7] or v[7] == '') and
    (ARGV[7] == '' or not redis.call('HGET', KEYS[10], ARGV[7])) then` + releaseHandoff + `
  end
end
` + luaHelpers + luaHolder + luaNextWaiter + luaCountFence + luaHandoff + luaHandoffLimited + `
-- without is holds hs (",a,b,") without the hold id, or without those of
-- the ids "|a|c|" names; nil if none of them is there.
local function without(hs, id)
  if string.sub(id, 1, 1) ~= '|' then
    local s, e = string.find(hs, ',' .. id .. ',', 1, true)
    return s and string.sub(hs, 1, s) .. string.sub(hs, e + 1)
  end
  local left, any = ',', false
  for h in string.gmatch(hs, '[^,]+') do
    if string.find(id, '|' .. h .. '|', 1, true) then
      any = true
    else
      left = left .. h .. ','
    end
  end
  return any and left
end
-- unmarkOwn removes call's mark of mode m, if the hold it pends is one
-- of ids ("|id|…|"): not a mark the call, made again, placed since (a
-- retried release of its earlier run's hold must not take it). Whether
-- there was one.
local function unmarkOwn(W, Q, P, m, call, ids)
  if call == '' then
    return false
  end
  local p = redis.call('HGET', P, call)
  if not p or not string.find(ids, '|' .. string.match(p, '^%S+') .. '|', 1, true) then
    return false
  end
  redis.call('ZREM', Q, call)
  redis.call('ZREM', W, m .. call)
  redis.call('HDEL', P, call)
  return true
end
-- tell publishes news and the next waiter w on ch, if not "" and, with
-- the quiet flag (the last ARGV), only where w is someone.
local function tell(ch, news, w)
  if ch ~= '' and (ARGV[#ARGV] ~= '1' or w ~= '') then
    redis.call('PUBLISH', ch, news .. w)
  end
end
local out = {}
for i = 0, (#KEYS - 1) / 9 - 1 do
  local b, c = 1 + 9 * i, 2 + 5 * i
  local H, Z, W, P = KEYS[b + 1], KEYS[b + 2], KEYS[b + 3], KEYS[b + 9]
  local m, owner, id, ch = ARGV[c + 1], ARGV[c + 2], ARGV[c + 3], ARGV[c + 4]
  local unmarked = unmarkOwn(W, KEYS[b + 4 + tonumber(m)], P, m, ARGV[c + 5], id)
  local v, live = holder(H, Z, m, owner)
  local rest -- the holds left
  if live and v[1] then
    rest = without(v[1], id)
  end
  local L4
  if m == '4' then
    L4 = Z
  end
  if not rest then
    out[i + 1] = 0
    if unmarked then
      if redis.call('HGET', H, 'o') == '' then
        tidy(H, W)
      end
      tell(ch, ' 0', nextWaiter(H, W, b + 4, L4))
    end
  elseif rest ~= ',' then
    redis.call('HSET', H, 'h' .. m .. owner, rest)
    out[i + 1] = 1
  else
    local freed, handed = true, false
    local news = (v[3] or '') .. ' ' .. (v[2] or '0')
    forget(H, m, owner)
    if m == '0' then
      redis.call('HDEL', H, 'x', 'xe', 'xa')
      if ch ~= '' then
        handed = handoff(H, W, b + 4, P, ch, news)
      end
    else
      redis.call('ZREM', Z, owner)
      if m == '4' and ch ~= '' then
        handed = handoffLimited(H, Z, W, b + 4, P, ch, news)
      end
      local top = redis.call('ZRANGE', Z, -1, -1, 'WITHSCORES')
      freed = m == '4' or not alive(top[2])
      if not top[1] then
        redis.call('HSET', H, 'z', (string.gsub(redis.call('HGET', H, 'z') or '', m, '')))
      end
    end
    tidy(H, W)
    if freed and not handed then
      tell(ch, news, nextWaiter(H, W, b + 4, L4))
    end
    out[i + 1] = 2
  end
end
return out
`)

// releaseHandoff is the general path's work (unmarkOwn, holder, forget,
// handoff, tidy) for one Exclusive hold, the last of its holder, whose
// key goes to the first waiting mark, read before it writes and with none
// of the helpers that the general path defines at every run: the release
// of a key handed from waiter to waiter, the hand-off's own path. v is
// the anchor's h, x, xe, a, f, w, z, N, o and L; the call pends no mark
// left, the anchor has marks (w) and no holders of other modes (z), and
// is no old version's record (o). Unless handoff would hand the key (the
// first live mark an Exclusive one that pends a hold renewed within half
// its TTL), it writes nothing and the general path decides.
var releaseHandoff = `
    local W, P, ch, best = KEYS[4], KEYS[10], ARGV[6], nil
    for i = 1, #v[6] do -- firstMark's, with the mark's expiry
      local k = tonumber(string.sub(v[6], i, i))
      local h = redis.call('ZRANGE', KEYS[5 + k], 0, 7, 'WITHSCORES')
      for j = 1, #h, 2 do
        local e = redis.call('ZSCORE', W, k .. h[j])
        if e and tonumber(e) > now then
          local st = tonumber(h[j + 1])
          if not best or st < best[1] or (st == best[1] and h[j] < best[3]) then
            best = {st, k, h[j], h[j + 1], tonumber(e)}
          end
          break
        end
      end
    end
    local p = best and best[2] == 0 and redis.call('HGET', P, best[3])
    local hid, ttl, at, to, heir = string.match(p or '', '^(%S+) (%d+) (%d+) (%S+) (.*)$')
    if hid and best[5] - now >= tonumber(ttl) / 2 then
      ttl = tonumber(ttl)
` + luaNextFence + `
      redis.call('HDEL', H, 'f' .. mo, 'h' .. mo, 'a' .. mo, 'x', 'xe', 'xa')
      local no = '0' .. heir
      redis.call('HSET', H, 'f' .. no, c, 'h' .. no, ',' .. hid .. ',', 'a' .. no, hid,
        'L', math.max(c, tonumber(v[10] or '0')), 'x', heir, 'xe', now + ttl, 'xa', hid)
      if redis.call('PTTL', H) < ttl then
        redis.call('PEXPIRE', H, ttl)
      end
      redis.call('ZREM', KEYS[5], best[3])
      redis.call('ZREM', W, '0' .. best[3])
      redis.call('HDEL', P, best[3])
      local msg = #ch .. ' ' .. ch .. (v[4] or '') .. ' ' .. (v[5] or '0') .. ' ' .. best[4] ..
        ' 0 ' .. best[3] .. ' h ' .. hid .. string.format(' %d %d', c, now - tonumber(at))
      redis.call('PUBLISH', ARGV[2] .. to, msg)
      return {2, to, msg}
    end`

// unmarkScript drops a call's waiting mark: KEYS anchor, marks by expiry,
// marks by mode, pending holds, Limited holders; ARGV mode, call id,
// channel ("" for silence). Replies
// {1} if there was one: then, as a waiter behind it may be admitted, it
// publishes " 0[ <next waiter>]" (a release of nobody's hold).
var unmarkScript = goredis.NewScript(luaPrelude + luaNextWaiter + `
local gone = redis.call('ZREM', KEYS[3 + tonumber(ARGV[1])], ARGV[2])
redis.call('ZREM', KEYS[2], ARGV[1] .. ARGV[2])
redis.call('HDEL', KEYS[8], ARGV[2])
if gone == 1 then
  if redis.call('HGET', KEYS[1], 'o') == '' then
    tidy(KEYS[1], KEYS[2])
  end
  if ARGV[3] ~= '' then
    redis.call('PUBLISH', ARGV[3], ' 0' .. nextWaiter(KEYS[1], KEYS[2], 3, KEYS[#KEYS]))
  end
end
return {gone}
`)
