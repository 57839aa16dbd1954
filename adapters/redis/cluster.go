package redis

import (
	"context"
	"fmt"
	"hash/fnv"
	"net/url"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/rediskey"
	"github.com/locker-go/locker/internal/urlx"
)

// On a Redis Cluster (a ClusterClient, redis-cluster://) whose prefix has
// no hash tag, each lock lives in a hash slot of its own: its keys and its
// fence counter carry the hash tag of the lock (tag), so that a script
// reaches them all, and the locks spread over every master. A plain key's
// tag is its own; a subtree path's is its tree's (the path's first
// segment), so that a subtree lock, its ancestors' intention locks and the
// fences of the whole tree share one slot and one counter: a lock below a
// path is fenced above a subtree lock on the path, as on one server, and a
// subtree lock takes its nodes in one script. A prefix with a hash tag
// ("{locker}:") keeps every lock in that one slot instead.

// slotted reports whether each lock has a slot of its own.
func (d *redisDriver) slotted() bool {
	_, cluster := d.client.(*goredis.ClusterClient)
	return cluster && !hashTagged(d.prefix)
}

// tagLen is the length of a tag: "{" + 8 hex digits + "}".
const tagLen = 10

// tag is the hash tag of key's lock in space, on a slotted cluster, else
// "": the hash of the key (a subtree path's tree), so that any key makes a
// well-formed tag, braces and all.
func (d *redisDriver) tag(space driver.Space, key string) string {
	if !d.slotted() {
		return ""
	}
	if space == driver.Subtree {
		key, _, _ = strings.Cut(key, "/")
	}
	h := fnv.New32a()
	h.Write([]byte(key))
	return fmt.Sprintf("{%08x}", h.Sum32())
}

// untag is the key of the lock key name k of space (see lockKey).
func (d *redisDriver) untag(space driver.Space, k string) string {
	k = strings.TrimPrefix(k, d.prefix+base(space)+"lock:")
	if d.slotted() && len(k) >= tagLen {
		k = k[tagLen:]
	}
	return k
}

// lockPattern is the SCAN pattern of the lock key names of space whose
// keys begin with prefix.
func (d *redisDriver) lockPattern(space driver.Space, prefix string) string {
	head := strings.TrimSuffix(rediskey.MatchPrefix(d.prefix+base(space)+"lock:"), "*")
	if d.slotted() {
		head += `\{????????\}`
	}
	return head + rediskey.MatchPrefix(prefix)
}

// openCluster returns a Locker for
//
//	redis-cluster://[user:password@]host:port[,host:port...][?prefix=locker:&...]
//
// over a go-redis ClusterClient; the query's other parameters are
// go-redis's (see redis.ParseClusterURL).
func openCluster(ctx context.Context, u *url.URL) (locker.Locker, error) {
	hosts, err := urlx.Hosts(u.Host, "6379")
	if err != nil {
		return nil, urlx.Invalid(u, "%v", err)
	}
	q := u.Query()
	opts := []Option{func(d *redisDriver) { d.closeClient = true }}
	if q.Has("prefix") {
		p := q.Get("prefix")
		if strings.ContainsAny(p, "{}") && !hashTagged(p) {
			return nil, urlx.Invalid(u, "prefix %q has a brace but no hash tag: on a cluster, braces in a prefix are a hash tag, {...}", p)
		}
		opts = append(opts, WithPrefix(p))
		q.Del("prefix")
	}
	for _, h := range hosts[1:] {
		q.Add("addr", h)
	}
	first := url.URL{Scheme: "redis", User: u.User, Host: hosts[0], RawQuery: q.Encode()}
	o, err := goredis.ParseClusterURL(first.String())
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", locker.ErrInvalidURL, urlx.Redact(u), urlx.Scrub(err.Error(), u))
	}
	client := goredis.NewClusterClient(o)
	if err := client.ForEachShard(ctx, func(ctx context.Context, c *goredis.Client) error { return c.Ping(ctx).Err() }); err != nil {
		client.Close()
		return nil, locker.Unavailable(fmt.Errorf("locker/redis: cluster %s: %v", strings.Join(hosts, ","), urlx.Scrub(err.Error(), u)))
	}
	return New(client, opts...)
}

// sameSlot reports whether the locks of rs (or hs) share a slot, where
// each has a slot of its own: then one script reaches them.
func (d *redisDriver) sameSlot(spaces []driver.Space, keys []string) bool {
	if !d.slotted() {
		return true
	}
	for i := range keys {
		if d.tag(spaces[i], keys[i]) != d.tag(spaces[0], keys[0]) {
			return false
		}
	}
	return true
}
