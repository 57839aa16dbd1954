package redsync

import (
	"context"
	"testing"

	"github.com/locker-go/locker/driver"
)

// Waiting marks stand in their stamps' order on every master, whatever
// order they reached each in: the first waiter is the first everywhere,
// so that waiters never each win a minority, for ever.
func TestMarkOrderIsTheStamp(t *testing.T) {
	ls, clients, _ := prefixedLockers(t, 1)
	l := ls[0]
	ctx := context.Background()
	n := name{driver.Plain, "k"}
	keys := append([]string{l.counterKey()}, l.records(n)...)
	attempt := func(i int, owner, call string, stamp int64, queue int) int64 {
		t.Helper()
		v, err := acquireScript.Run(ctx, clients[i], keys, 1, owner, 0, 60000, "1"+call, false, queue, call, stamp,
			conflicting[driver.Exclusive], 0, "").Int64Slice()
		if err != nil {
			t.Fatalf("master %d: %v", i, err)
		}
		return v[0]
	}
	holdOn(t, l, clients, n.key, "holder", 0, 1, 2, 3, 4)
	for i := range clients {
		order := []string{"a", "b"}
		if i%2 == 0 {
			order = []string{"b", "a"}
		}
		for _, c := range order {
			stamp := map[string]int64{"a": 100, "b": 200}[c]
			if got := attempt(i, "w"+c, c, stamp, remark); got != refused {
				t.Fatalf("master %d: waiter %s beside the holder: outcome %d, want refused", i, c, got)
			}
		}
	}
	res := l.release(ctx, []*held{{d: l.redlock, n: n, mode: driver.Exclusive, owner: "holder", id: "77", ttl: 60000}}, nil, false)
	if err := l.outcome(res, 2); err != nil {
		t.Fatal(err)
	}
	l.bg.Wait() // the release returns at a quorum: the other masters' replies
	for i := range clients {
		if got := attempt(i, "wb", "b", 200, queued); got != refused {
			t.Errorf("master %d: the second waiter's attempt: outcome %d, want refused behind the first", i, got)
		}
		if got := attempt(i, "x", "x", 0, notQueued); got != refused {
			t.Errorf("master %d: a TryLock: outcome %d, want refused behind the waiters", i, got)
		}
		if got := attempt(i, "wa", "a", 100, queued); got != granted {
			t.Errorf("master %d: the first waiter's attempt: outcome %d, want granted", i, got)
		}
	}
}
