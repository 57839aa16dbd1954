package redsync

import (
	"fmt"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
)

// Semaphores (driver.Limiter): Limited is a fifth mode on every master,
// its holders a sorted set as a shared mode's, its waiting marks a queue
// of their own, and the anchor's N the Limit of its holders (read as
// theirs only while one is live: the next grant overwrites it; until then
// it hints at the waiters' Limit, for the wakes). acquireScript applies limit on each master; the grant,
// its fence and its undo are a quorum's as for any mode.

// KeepsLimits declares that Acquire grants Limited requests by the rule
// driver.Limiter states (see luaLimit).
func (d *redlock) KeepsLimits() {}

var _ driver.Limiter = (*redlock)(nil)

// luaLimit is acquireScript's rules 2 and 3 of driver.Limiter for the
// request of mode m on KEYS k, ARGV a, anchor s (limit(k, a, s, m)). For
// another mode: nil, unless live Limited holders hold the key, {misLimit,
// 4, their Limit}. For a Limited request: {misLimit, mode, Limit} if a
// holder of another mode, or Limited of another Limit, holds it; else
// {granted} while its live holders and the live Limited marks before it
// (ahead) are fewer than its Limit; else a refusal, who -10 (the holders)
// or -9 (Limited marks), for as long as the first of them lasts.
const luaLimit = `
local function ahead(k, a, room)
  local queued, call, stamp = ARGV[a + 6] ~= '0', ARGV[a + 7], tonumber(ARGV[a + 8])
  local Q, W = KEYS[k + 11], KEYS[k + 6]
  local got, first, i = 0, nil, 0
  while true do
    local h = redis.call('ZRANGE', Q, i, i + 15, 'WITHSCORES')
    if not h[1] then
      return got, first
    end
    for j = 1, #h, 2 do
      local st = tonumber(h[j + 1])
      if queued and (st > stamp or (st == stamp and h[j] >= call)) then
        return got, first
      end
      local exp = alive(redis.call('ZSCORE', W, '4' .. h[j]))
      if exp then
        got, first = got + 1, math.min(first or exp, exp)
        if got >= room then
          return got, first
        end
      end
    end
    i = i + 16
  end
end
local function limit(k, a, s, m)
  local live, held = 0, 0
  if has(s.z, 4) then
    live = redis.call('ZCOUNT', KEYS[k + 5], '(' .. now, '+inf')
    if live > 0 then
      held = tonumber(redis.call('HGET', KEYS[k + 1], 'N') or '0') or 0
    end
  end
  if m ~= 4 then
    if live > 0 then
      return {5, 4, held, 0}
    end
    return nil
  end
  if s.x and alive(s.xe) then
    return {5, 0, 0, 0}
  end
  for o = 1, 3 do
    if has(s.z, o) and alive(redis.call('ZRANGE', KEYS[k + 1 + o], -1, -1, 'WITHSCORES')[2]) then
      return {5, o, 0, 0}
    end
  end
  local n = tonumber(ARGV[a + 10])
  if live > 0 and held ~= n then
    return {5, 4, held, 0}
  end
  local first, who = nil, -10
  if live > 0 then
    first = tonumber(redis.call('ZRANGEBYSCORE', KEYS[k + 5], '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)[2])
  end
  if live < n and has(s.w, 4) then
    local got, exp = ahead(k, a, n - live)
    if got > 0 then
      live, first, who = live + got, math.min(first or exp, exp), -9
    end
  end
  if live < n then
    return {2}
  end
  return {0, math.max(first - now, 0), who, 0}
end
`

// limitMismatch is the error of r, refused by a quorum's mismatches, the
// last of them reporting holders in mode held (of Limit n if Limited)
// where either they or r are Limited.
func limitMismatch(r *driver.Request, held driver.Mode, n int) error {
	asked := "as " + r.Mode.String()
	if r.Mode == driver.Limited {
		asked = fmt.Sprintf("by a Limit(%d)", r.Limit)
	}
	if held == driver.Limited {
		return fmt.Errorf("%w: %q is held by a Limit(%d), asked for %s", locker.ErrModeMismatch, r.Key, n, asked)
	}
	return fmt.Errorf("%w: %q is held as %v, asked for %s", locker.ErrModeMismatch, r.Key, held, asked)
}
