package peers

import (
	"bufio"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"

	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/testenv"
)

// Failover: how long after the leader's process is killed (SIGKILL: no
// resignation, no goodbye) a waiting candidate leads, ours on every
// backend and etcd's concurrency.Election, each with a term of failoverTTL
// (etcd's least lease TTL is 1 s; ZooKeeper's session timeout the server
// allows). The leader is a child process, this test binary run again with
// failoverChild set; the candidate campaigns in this process.

// failoverTTL is every subject's lease or session length.
const failoverTTL = 2 * time.Second

// failoverChild, set in a child's environment, makes TestMain campaign
// instead of running tests: "<subject> <url>".
const failoverChild = "PEERS_FAILOVER_CHILD"

func TestMain(m *testing.M) {
	if spec := os.Getenv(failoverChild); spec != "" {
		os.Exit(leadUntilKilled(spec))
	}
	os.Exit(m.Run())
}

// candidate campaigns for name and resigns: ours or a peer's.
type candidate interface {
	campaign(ctx context.Context, name string) (resign func(), err error)
}

// BenchmarkFailover reports failover-ms, the mean time from the leader's
// SIGKILL to the waiting candidate's leadership.
func BenchmarkFailover(b *testing.B) {
	zk := testenv.URL(b, "LOCKER_TEST_ZK")
	q := zk.Query()
	q.Set("session_timeout", failoverTTL.String())
	zk.RawQuery = q.Encode()
	etcd := testenv.URL(b, "LOCKER_TEST_ETCD")
	sqlite := "sqlite://" + filepath.ToSlash(filepath.Join(b.TempDir(), "failover.db"))
	for _, c := range []struct{ backend, subject, url string }{
		{"redis", "ours", testenv.URL(b, "LOCKER_TEST_REDIS").String()},
		{"redlock", "ours", testenv.URL(b, "LOCKER_TEST_REDLOCK").String()},
		{"etcd", "ours", etcd.String()},
		{"etcd", "etcd-election", etcd.String()},
		{"zookeeper", "ours", zk.String()},
		{"postgres", "ours", testenv.URL(b, "LOCKER_TEST_POSTGRES").String()},
		{"mysql", "ours", testenv.URL(b, "LOCKER_TEST_MYSQL").String()},
		{"sqlite", "ours", sqlite},
	} {
		b.Run(c.backend+"/"+c.subject, func(b *testing.B) {
			cand := newCandidate(b, c.subject, c.url)
			var total time.Duration
			for i := range b.N {
				total += failover(b, cand, c.subject, c.url, fmt.Sprintf("%sfailover/%d-%d", prefix, time.Now().UnixNano(), i))
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "failover-ms")
			b.ReportMetric(float64(failoverTTL.Milliseconds()), "ttl-ms")
		})
	}
}

// failover starts a leader of name in a child process, has cand campaign,
// kills the child and returns how long cand then took to lead.
func failover(b *testing.B, cand candidate, subject, rawURL, name string) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	child := exec.Command(os.Args[0])
	child.Env = append(os.Environ(), failoverChild+"="+subject+" "+rawURL+" "+url.PathEscape(name))
	out, err := child.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "leading\n" {
		b.Fatalf("the leader's process printed %q, %v; want \"leading\"", line, err)
	}
	led := make(chan func(), 1)
	go func() {
		resign, err := cand.campaign(ctx, name)
		if err != nil {
			b.Error(err)
		}
		led <- resign
	}()
	time.Sleep(100 * time.Millisecond) // the candidate waits before the kill (not needed for correctness)
	killed := time.Now()
	if err := child.Process.Kill(); err != nil {
		b.Fatal(err)
	}
	resign := <-led
	took := time.Since(killed)
	if resign == nil {
		b.FailNow()
	}
	resign()
	return took
}

// leadUntilKilled is a child: it leads spec's election, says so, and
// waits to be killed.
func leadUntilKilled(spec string) int {
	f := strings.Fields(spec)
	name, _ := url.PathUnescape(f[2])
	ctx := context.Background()
	cand, err := openCandidate(f[0], f[1])
	if err == nil {
		_, err = cand.campaign(ctx, name)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "failover child:", err)
		return 1
	}
	fmt.Println("leading")
	select {}
}

// newCandidate is openCandidate, closed when b ends.
func newCandidate(b *testing.B, subject, rawURL string) candidate {
	c, err := openCandidate(subject, rawURL)
	if err != nil {
		b.Fatal(err)
	}
	if cl, ok := c.(interface{ close() }); ok {
		b.Cleanup(cl.close)
	}
	return c
}

func openCandidate(subject, rawURL string) (candidate, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if subject == "etcd-election" {
		u, err := url.Parse(rawURL)
		if err != nil {
			return nil, err
		}
		c, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(u.Host, ","), DialTimeout: 10 * time.Second, Logger: nopZap})
		return etcdCandidate{c}, err
	}
	l, err := locker.Open(ctx, rawURL)
	return oursCandidate{l}, err
}

// oursCandidate campaigns with locker.Campaign.
type oursCandidate struct{ l locker.Locker }

func (o oursCandidate) campaign(ctx context.Context, name string) (func(), error) {
	lead, err := locker.Campaign(ctx, o.l, name, locker.WithTTL(failoverTTL))
	if err != nil {
		return nil, err
	}
	return func() { _ = lead.Unlock(context.Background()) }, nil
}

func (o oursCandidate) close() { _ = o.l.Close() }

// etcdCandidate campaigns with concurrency.Election on a session of its
// own per campaign, of failoverTTL.
type etcdCandidate struct{ c *clientv3.Client }

func (e etcdCandidate) campaign(ctx context.Context, name string) (func(), error) {
	s, err := concurrency.NewSession(e.c, concurrency.WithTTL(int(failoverTTL/time.Second)))
	if err != nil {
		return nil, err
	}
	el := concurrency.NewElection(s, "/"+name)
	if err := el.Campaign(ctx, "candidate"); err != nil {
		_ = s.Close()
		return nil, err
	}
	return func() { _ = el.Resign(context.Background()); _ = s.Close() }, nil
}

func (e etcdCandidate) close() { _ = e.c.Close() }
