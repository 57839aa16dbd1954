package redsync

import goredis "github.com/redis/go-redis/v9"

// The operators' scripts. Both take KEYS anchor, S holders, marks by
// expiry, L holders: a key's locks are its Shared, Exclusive and Limited
// holders (intention holders are not locks of their own).

// forceScript: ARGV release channel. Deletes the key's S, X and L holders
// (or an old version's record), live or not, and publishes " <fence>"
// with the largest fence removed; {1} if a live one was, else {0}.
var forceScript = goredis.NewScript(luaPrelude + `
local H = KEYS[1]
local v = redis.call('HMGET', H, 'o', 'x', 'xe')
if not v[1] then
  return {0}
elseif v[1] ~= '' then
  local f = redis.call('HGET', H, 'f')
  redis.call('DEL', H)
  redis.call('PUBLISH', ARGV[1], ' ' .. (f or '0'))
  return {1}
end
local live, top, fence = 0, 0, '0'
local function gone(m, owner, exp)
  local f = redis.call('HGET', H, 'f' .. m .. owner) or '0'
  if alive(exp) then
    live = live + 1
    if tonumber(f) > top then
      top, fence = tonumber(f), f
    end
  end
  forget(H, m, owner)
end
if v[2] then
  gone(0, v[2], v[3])
  redis.call('HDEL', H, 'x', 'xe', 'xa')
end
local all = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
for i = 1, #all, 2 do
  gone(1, all[i], all[i + 1])
end
redis.call('DEL', KEYS[2])
all = redis.call('ZRANGE', KEYS[4], 0, -1, 'WITHSCORES')
for i = 1, #all, 2 do
  gone(4, all[i], all[i + 1])
end
redis.call('DEL', KEYS[4])
redis.call('HDEL', H, 'N')
tidy(H, KEYS[3])
if live == 0 then
  return {0}
end
redis.call('PUBLISH', ARGV[1], ' ' .. fence)
return {1}
`)

// statusScript replies {} for a free key; {"legacy", owner, holds,
// fence, pttl} for an old version's record; else {"", live marks, the
// Limit of live L holders (0 if none), then per live S, X or L holder:
// mode, owner, holds, fence, pttl}.
var statusScript = goredis.NewScript(luaPrelude + `
local H = KEYS[1]
local v = redis.call('HMGET', H, 'o', 'x', 'xe', 'w')
if not v[1] then
  return {}
elseif v[1] ~= '' then
  local r = redis.call('HMGET', H, 'n', 'f')
  return {'legacy', v[1], r[1] or '1', r[2] or '0', redis.call('PTTL', H)}
end
local out = {'', 0, 0}
if v[4] then
  out[2] = redis.call('ZCOUNT', KEYS[3], '(' .. now, '+inf')
end
local function add(m, owner, exp)
  local r = redis.call('HMGET', H, 'h' .. m .. owner, 'f' .. m .. owner)
  local _, holds = string.gsub(r[1] or ',', ',', ',')
  for _, x in ipairs({m, owner, holds - 1, r[2] or '0', exp - now}) do
    out[#out + 1] = x
  end
end
if v[2] and alive(v[3]) then
  add(0, v[2], tonumber(v[3]))
end
local live = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. now, '+inf', 'WITHSCORES')
for i = 1, #live, 2 do
  add(1, live[i], tonumber(live[i + 1]))
end
live = redis.call('ZRANGEBYSCORE', KEYS[4], '(' .. now, '+inf', 'WITHSCORES')
for i = 1, #live, 2 do
  add(4, live[i], tonumber(live[i + 1]))
end
if #live > 0 then
  out[3] = tonumber(redis.call('HGET', H, 'N') or '0') or 0
end
return out
`)
