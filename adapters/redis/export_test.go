package redis

// CommandCounter is the go-redis hook that counts a client's commands, for
// the external tests.
type CommandCounter = counter
