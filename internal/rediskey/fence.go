package rediskey

// ClockFloor is Lua, for a script whose KEYS[n] is a fence counter, that
// starts a missing counter from the server's clock in microseconds. A
// counter lost with the server's data (a restart without persistence, a
// failover to a replica that lagged) then resumes above every fence it
// handed out before, as long as it grew by less than one a microsecond:
// fences never go back. The value stays exact in Lua's doubles (below
// 2^53) for a few centuries yet.
func ClockFloor(n string) string { return ClockFloorKey("KEYS[" + n + "]") }

// ClockFloorKey is ClockFloor for the counter that the Lua expression key
// names (a local variable, say).
func ClockFloorKey(key string) string {
	return `
if redis.call('EXISTS', ` + key + `) == 0 then
  local t = redis.call('TIME')
  redis.call('SET', ` + key + `, string.format('%d', tonumber(t[1]) * 1000000 + tonumber(t[2])))
end
`
}

// NextFence is Lua that sets the variable v (declared by the caller) to
// the next fence of the counter that the Lua expression key names: its
// INCR, in one server call, and a counter that was missing (INCR answers
// 1) starts from the server's clock, as ClockFloor's does.
func NextFence(v, key string) string {
	return `
` + v + ` = redis.call('INCR', ` + key + `)
if ` + v + ` == 1 then
  local t = redis.call('TIME')
  ` + v + ` = tonumber(t[1]) * 1000000 + tonumber(t[2]) + 1
  redis.call('SET', ` + key + `, string.format('%d', ` + v + `))
end
`
}

// RaiseTo is Lua, for a script whose KEYS[n] is a fence counter and
// ARGV[a] a floor, that raises the counter to the floor (started from the
// clock first, as ClockFloor does, if missing): every later fence of the
// counter is above the floor.
func RaiseTo(n, a string) string {
	return ClockFloor(n) + `
if tonumber(redis.call('GET', KEYS[` + n + `])) < tonumber(ARGV[` + a + `]) then
  redis.call('SET', KEYS[` + n + `], ARGV[` + a + `])
end
`
}
