package etcd

import (
	"context"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locker-go/locker/internal/backoff"
)

// The client shares one gRPC stream among the watches whose contexts carry
// the same metadata, and ends that stream when its last watch ends. A
// waiter's watch lives for one hand-off, so without more each wait would
// open a gRPC stream and close it again (the server counted one stream
// per wait; with the anchor, one per client). A watch of a key nobody
// writes, from the first wait until Close, keeps the stream of the
// waiters' contexts (WithRequireLeader) open.

// anchorKey is the key the anchor watches, under the prefix: no entry is
// named so (an escaped key begins with '%' only as "%25" or "%2F").
const anchorKey = "%A"

// anchor holds the waiters' watch stream open, once per driver.
type anchor struct{ once sync.Once }

// watchCtx is the context of a waiter's watch living as long as ctx: on
// the stream the anchor keeps open, which it starts on the first call.
func (d *etcdDriver) watchCtx(ctx context.Context) context.Context {
	d.anchor.once.Do(func() { d.sweeper.Go(d.holdStream) })
	return clientv3.WithRequireLeader(ctx)
}

// holdStream watches anchorKey until the driver closes, watching again
// (with backoff) when the watch ends (the leader lost, the stream broken).
func (d *etcdDriver) holdStream() {
	p := backoff.Policy{Min: 100 * time.Millisecond, Max: 5 * time.Second}
	backoff.Retry(d.ctx, p, func(ctx context.Context) bool {
		for range d.client.Watch(clientv3.WithRequireLeader(ctx), d.prefix+anchorKey) {
		}
		return ctx.Err() != nil
	})
}
