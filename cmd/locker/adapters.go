package main

// Every adapter of the module, imported for its side effect: it registers
// its URL schemes with locker.Open. (mem:// serves one process only: bench
// runs it as the portable layer's own cost, with no backend behind it.)
import (
	_ "github.com/locker-go/locker/adapters/etcd"      // etcd://, etcds://
	_ "github.com/locker-go/locker/adapters/mem"       // mem://
	_ "github.com/locker-go/locker/adapters/redis"     // redis://, rediss://, redis-cluster://
	_ "github.com/locker-go/locker/adapters/redsync"   // redlock://
	_ "github.com/locker-go/locker/adapters/sql"       // sqlite://, postgres://, postgresql://, mysql://
	_ "github.com/locker-go/locker/adapters/zookeeper" // zk://
)
