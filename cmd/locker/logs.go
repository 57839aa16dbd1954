package main

import (
	"context"

	goredis "github.com/redis/go-redis/v9"
)

// Backend drivers log on their own (go-redis prints every failed dial);
// locker reports the errors they return instead, scrubbed. Silence them so
// nothing reaches the terminal unscrubbed.
func init() { goredis.SetLogger(discardLogger{}) }

type discardLogger struct{}

func (discardLogger) Printf(context.Context, string, ...any) {}
