package redsync

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker/driver"
	"github.com/locker-go/locker/internal/testenv"
)

// A round whose caller gives up returns at once, but the calls still out
// run on to the timeout, their replies to come (late): cut off, a script
// already sent might yet run on its master after the undo sent on
// another connection, and leave a hold or a mark behind it.
func TestRoundCutShortByTheCallerKeepsItsCalls(t *testing.T) {
	d := &redlock{masters: []*master{{}, {}, {}}, crew: newCrew(crewIdle)}
	defer d.crew.stop()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	release, outlived := make(chan struct{}), make(chan bool, 1)
	res, late := eachUntil(ctx, d, time.Minute, func(calls context.Context, i int, _ goredis.UniversalClient) (int, error) {
		if i > 0 {
			return i, nil
		}
		cancel() // the caller gives up while master 0's call is out
		<-release
		outlived <- calls.Err() == nil
		return 7, nil
	}, nil, true)
	if late == nil {
		t.Fatal("a round cut short by its caller left no late replies: its calls were cut off")
	}
	if res[0].err != errNoAnswer {
		t.Fatalf("master 0's reply as the round returned = %v, %v; want none yet", res[0].v, res[0].err)
	}
	close(release)
	testenv.Signalled(t, late.done, "the late reply")
	if !<-outlived {
		t.Fatal("master 0's call was cut off as its caller gave up")
	}
	if got := late.all()[0]; got.err != nil || got.v != 7 {
		t.Fatalf("master 0's late reply = %v, %v; want 7", got.v, got.err)
	}
}

// Without keep (admin calls, renewals, marks' removal), the calls of a
// round end with its caller's ctx, as do a kept round's whose caller had
// given up before it began: nothing runs on for a caller that is gone.
func TestRoundEndsItsCallsWithoutKeep(t *testing.T) {
	d := &redlock{masters: []*master{{}, {}, {}}, crew: newCrew(crewIdle)}
	defer d.crew.stop()
	gone, stop := context.WithCancel(t.Context())
	stop()
	cut := make(chan bool, len(d.masters))
	if _, late := eachUntil(gone, d, time.Minute, func(calls context.Context, _ int, _ goredis.UniversalClient) (int, error) {
		cut <- calls.Err() != nil
		return 0, calls.Err()
	}, nil, true); late != nil {
		t.Fatal("a kept round of a caller gone before it left late replies")
	}
	for range d.masters {
		if !<-cut {
			t.Fatal("a kept round of a caller gone before it began a call that may run")
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ended := make(chan struct{})
	if _, late := eachUntil(ctx, d, time.Minute, func(calls context.Context, i int, _ goredis.UniversalClient) (int, error) {
		if i == 0 {
			cancel()
			<-calls.Done() // the round ends it with the caller's ctx
			close(ended)
		}
		return i, nil
	}, nil, false); late != nil {
		t.Fatal("a round without keep left late replies")
	}
	testenv.Signalled(t, ended, "the call's end with its caller's ctx")
}

// A Limited grant needs more than n·N/(n+1) masters, so that n+1 holders
// cannot each gather it while every master admits at most n; a majority
// for any other mode, and for Limit(1), which excludes as Exclusive does.
func TestQuorumOfALimit(t *testing.T) {
	for _, tc := range []struct{ masters, n, want int }{
		{5, 1, 3}, {5, 2, 4}, {5, 3, 4}, {5, 4, 5}, {5, 10, 5},
		{3, 1, 2}, {3, 2, 3}, {3, 5, 3}, {7, 2, 5}, {7, 3, 6},
	} {
		d := &redlock{masters: make([]*master, tc.masters), quorum: tc.masters/2 + 1}
		if got := d.quorumOf(driver.Limited, tc.n); got != tc.want {
			t.Errorf("%d masters, Limit(%d): quorum %d, want %d", tc.masters, tc.n, got, tc.want)
		}
		if got := d.quorumOf(driver.Shared, tc.n); got != d.quorum {
			t.Errorf("%d masters, Shared: quorum %d, want the majority %d", tc.masters, got, d.quorum)
		}
	}
}
