package redis

import (
	"context"
	"crypto/rand"
	"testing"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/testenv"
)

// A watch on an election hears its leader's grant and resignation, which
// the Locker announces: on one server by PUBLISH, on a slotted cluster by
// SPUBLISH in the election's slot.
func TestWatchHearsAnnouncements(t *testing.T) {
	cluster := &redisDriver{prefix: "locker-watch-test:"}
	cc := dialCluster(t)
	cluster.client = cc
	cluster.sub = newSubscriber(cc, cluster.wakePrefix(), &cluster.Log)
	cluster.shards = &shards{cc: cc, sub: cluster.sub, subs: map[string]*shardSub{}}
	cluster.sub.sharded = true
	for name, d := range map[string]*redisDriver{"server": testDriver(t), "cluster": cluster} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			election := "e-" + rand.Text()
			changed, stop, err := d.Watch(ctx, driver.Subtree, election+"/")
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			l := locker.New(d)
			lead, err := locker.Campaign(ctx, l, election)
			if err != nil {
				t.Fatal(err)
			}
			testenv.Signalled(t, changed, "the leader's grant")
			if err := lead.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			testenv.Signalled(t, changed, "the leader's resignation")
			stop()
			if err := d.Announce(ctx, driver.Subtree, election+"/"); err != nil {
				t.Fatal(err)
			}
		})
	}
}
