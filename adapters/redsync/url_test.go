package redsync

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/testenv"
)

func TestParseURL(t *testing.T) {
	u, err := url.Parse("redlock://me:s3cret@h1:1,h2:2,h3:3/4?prefix=app:&node_timeout=20ms")
	if err != nil {
		t.Fatal(err)
	}
	addrs, base, opts, err := parseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"h1:1", "h2:2", "h3:3"}; !slices.Equal(addrs, want) {
		t.Errorf("addrs = %v, want %v", addrs, want)
	}
	if base.Username != "me" || base.Password != "s3cret" || base.DB != 4 || !base.ContextTimeoutEnabled {
		t.Errorf("client options = %+v", base)
	}
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.prefix != "app:" || cfg.nodeTimeout != 20*time.Millisecond {
		t.Errorf("options = %+v, want prefix app: and node timeout 20ms", cfg)
	}
	u, _ = url.Parse("redlock://h1,h2,h3")
	if addrs, _, _, err := parseURL(u); err != nil || !slices.Equal(addrs, []string{"h1:6379", "h2:6379", "h3:6379"}) {
		t.Errorf("masters without ports = %v, %v; want port 6379", addrs, err)
	}
}

func TestParseURLErrors(t *testing.T) {
	for _, raw := range []string{
		"redlock://u:s3cret@h1:1,h2:2",           // even
		"redlock://u:s3cret@h1:1",                // one
		"redlock://u:s3cret@h1:1,h2:2,h3:3,h4:4", // even
		"redlock://u:s3cret@h1:1,h2:x,h3:3",      // port
		"redlock://u:s3cret@h1:1,h2:0,h3:3",      // port
		"redlock://u:s3cret@h1:1,:2,h3:3",        // host
		"redlock://u:s3cret@h1:1,h2:2,h1:1",      // one master twice: two votes
		"redlock://u:s3cret@h1:1,h2:99999,h3:3",  // port
		"redlock://u:s3cret@h1:1,h2:2,h3:3/db",   // database
		"redlock://u:s3cret@h1:1,h2:2,h3:3?prefx=a",
		"redlock://u:s3cret@h1:1,h2:2,h3:3?node_timeout=-1s",
		"redlock://u:s3cret@h1:1,h2:2,h3:3?node_timeout=soon",
		"redlock:///nothing",
	} {
		_, err := locker.Open(context.Background(), raw)
		if !errors.Is(err, locker.ErrInvalidURL) {
			t.Errorf("Open(%q) = %v, want ErrInvalidURL", raw, err)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open(%q) error shows the password: %v", raw, err)
		}
	}
	_, err := locker.Open(context.Background(), "redlock://h1:1,h2:2")
	if !errors.Is(err, ErrMasterCount) {
		t.Errorf("two masters: %v, want ErrMasterCount", err)
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := New(nil); !errors.Is(err, ErrMasterCount) {
		t.Errorf("New(nil) = %v, want ErrMasterCount", err)
	}
	if _, err := New(make([]goredis.UniversalClient, 3)); !errors.Is(err, ErrMasterCount) {
		t.Errorf("New with nil clients = %v, want ErrMasterCount", err)
	}
}

func TestOpen(t *testing.T) {
	u := testenv.URL(t, "LOCKER_TEST_REDLOCK")
	q := u.Query()
	q.Set("prefix", "locker-test-open:")
	u.RawQuery = q.Encode()
	l, err := locker.Open(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lease, err := l.TryLock(context.Background(), "open/"+t.Name()+time.Now().Format(time.RFC3339Nano))
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := New(nil, WithNodeTimeout(0)); err == nil {
		t.Error("New accepted no masters")
	}
}
