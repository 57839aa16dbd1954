package peers

import (
	"context"
	"testing"

	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/locker-go/locker"
)

// nopZap silences the etcd clients' logging.
var nopZap = zap.NewNop()

// etcdMutexClient is etcd's concurrency.Mutex on its own client and
// session, the session's lease as long as our TTL.
func etcdMutexClient(tb testing.TB, endpoint string) locker.Locker {
	c := etcdClient(tb, endpoint)
	s, err := concurrency.NewSession(c, concurrency.WithTTL(int(ttl.Seconds())))
	if err != nil {
		tb.Fatal(err)
	}
	return shim{
		lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
			m := concurrency.NewMutex(s, "/"+prefix+key)
			if err := m.Lock(ctx); err != nil {
				return nil, err
			}
			return m.Unlock, nil
		},
		// The client itself is closed by etcdClient's cleanup.
		close: s.Close,
	}
}
