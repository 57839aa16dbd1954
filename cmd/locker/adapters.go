package main

// Every adapter of the module, imported for its side effect: it registers
// its URL schemes with locker.Open.
import (
	_ "github.com/locker-go/locker/adapters/etcd"      // etcd://, etcds://
	_ "github.com/locker-go/locker/adapters/redis"     // redis://, rediss://
	_ "github.com/locker-go/locker/adapters/redsync"   // redlock://
	_ "github.com/locker-go/locker/adapters/sql"       // sqlite://, postgres://, postgresql://
	_ "github.com/locker-go/locker/adapters/zookeeper" // zk://
)
