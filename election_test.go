package locker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/adapters/mem"
)

// List shows an election under its name, in the Election space, beside a
// plain lock of the same string, and filters it by the name.
func TestElectionInAdmin(t *testing.T) {
	ctx := context.Background()
	l := mem.New(t.Name())
	defer l.Close()
	adm := l.(locker.Admin)
	lead, err := locker.Campaign(ctx, l, "svc/leader", locker.WithLabel("host-a"))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := l.Lock(ctx, "svc/leader")
	if err != nil {
		t.Fatal(err)
	}
	list, err := adm.List(ctx, "svc/")
	if err != nil || len(list) != 2 {
		t.Fatalf("List = %+v, %v; want the plain lock and the election", list, err)
	}
	if list[0].Space != locker.SpacePlain || list[1].Space != locker.SpaceElection ||
		list[1].Key != "svc/leader" || list[1].Label != "host-a" || list[1].Fence != lead.Fence() {
		t.Errorf("List = %+v; want the plain key, then the election with its label and term %d", list, lead.Fence())
	}
	if got := locker.SpaceElection.String(); got != "election" {
		t.Errorf("SpaceElection.String() = %q", got)
	}
	if list, err := adm.List(ctx, "svc/leader/"); err != nil || len(list) != 0 {
		t.Errorf("List(\"svc/leader/\") = %+v, %v; want nothing: the prefix is matched against the name", list, err)
	}
	if err := plain.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.Status(ctx, "svc/leader"); !errors.Is(err, locker.ErrNotHeld) {
		t.Errorf("Status of the plain key = %v; want ErrNotHeld (the election is apart)", err)
	}
	if err := lead.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// Bad election input is refused before anything is taken.
func TestCampaignInvalid(t *testing.T) {
	ctx := context.Background()
	l := mem.New(t.Name())
	defer l.Close()
	for _, c := range []struct {
		name string
		opts []locker.Option
		want error
	}{
		{"x", []locker.Option{locker.Shared()}, locker.ErrInvalidOption},
		{"x", []locker.Option{locker.Subtree()}, locker.ErrInvalidOption},
		{strings.Repeat("n", locker.MaxKeyLen), nil, locker.ErrInvalidKey},
		{"", nil, locker.ErrInvalidKey},
		{"x", []locker.Option{locker.WithTTL(-time.Second)}, locker.ErrInvalidTTL},
	} {
		if lease, err := locker.Campaign(ctx, l, c.name, c.opts...); !errors.Is(err, c.want) {
			t.Errorf("Campaign(%.10q) = %v, %v; want %v", c.name, lease, err, c.want)
		}
	}
	if list, err := l.(locker.Admin).List(ctx, ""); err != nil || len(list) != 0 {
		t.Errorf("List after refused campaigns = %+v, %v; want nothing taken", list, err)
	}
	ch := locker.Observe(ctx, l, "")
	if _, ok := <-ch; ok {
		t.Error("Observe of an invalid name sent a leader; want the channel closed")
	}
}

// A leader that neither resigns nor renews (its process died) is seen
// gone at its expiry, with no signal from the driver.
func TestObserveSeesExpiry(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := mem.New(t.Name())
	defer l.Close()
	lead, err := locker.Campaign(ctx, l, "e", locker.WithTTL(100*time.Millisecond), locker.WithKeepAlive(false))
	if err != nil {
		t.Fatal(err)
	}
	seen := locker.Observe(ctx, l, "e")
	if got := <-seen; got.Fence != lead.Fence() || got.Name != "e" {
		t.Fatalf("first = %+v; want the leader, term %d", got, lead.Fence())
	}
	select {
	case got := <-seen:
		if got != (locker.Leader{}) {
			t.Errorf("after the expiry = %+v; want no leader", got)
		}
		if time.Now().Before(lead.Deadline()) {
			t.Errorf("no leader reported %v before the lease's Deadline", time.Until(lead.Deadline()))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the leader's expiry was not observed within 5s")
	}
}

// Observe needs an Admin; over another Locker its channel closes at once.
func TestObserveWithoutAdmin(t *testing.T) {
	l := mem.New(t.Name())
	defer l.Close()
	if _, ok := <-locker.Observe(context.Background(), notAdmin{l}, "e"); ok {
		t.Error("Observe over a Locker without Admin sent a leader")
	}
}

type notAdmin struct{ locker.Locker }
