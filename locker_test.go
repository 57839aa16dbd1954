package locker_test

import (
	"context"
	"crypto/rand"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/locker-go/locker"
)

func TestValidateKey(t *testing.T) {
	for key, ok := range map[string]bool{
		"a": true, "a.b": true, "ключ": true, "a/b/../c": true, "*": true,
		strings.Repeat("k", 512): true,
		"":                       false,
		strings.Repeat("k", 513): false,
		"\xff":                   false,
		"a\x00b":                 false,
	} {
		err := locker.ValidateKey(key)
		if ok != (err == nil) || (err != nil && !errors.Is(err, locker.ErrInvalidKey)) {
			t.Errorf("ValidateKey(%q) = %v, want ok=%v or ErrInvalidKey", key, err, ok)
		}
	}
}

func TestResolve(t *testing.T) {
	o, err := locker.Resolve("k")
	if err != nil || o.TTL != locker.DefaultTTL || !o.KeepAlive || o.Owner == "" || o.StableOwner {
		t.Fatalf("defaults = %+v, %v", o, err)
	}
	o2, _ := locker.Resolve("k")
	if o.Owner == o2.Owner {
		t.Errorf("two random owners are equal: %q", o.Owner)
	}
	o, err = locker.Resolve("k", locker.WithTTL(time.Second), locker.WithKeepAlive(false), locker.WithOwner("me"))
	if err != nil || o.TTL != time.Second || o.KeepAlive || o.Owner != "me" || !o.StableOwner {
		t.Fatalf("options = %+v, %v", o, err)
	}
	for _, ttl := range []time.Duration{0, -1, locker.MaxTTL + 1} {
		if _, err := locker.Resolve("k", locker.WithTTL(ttl)); !errors.Is(err, locker.ErrInvalidTTL) {
			t.Errorf("TTL %v: %v, want ErrInvalidTTL", ttl, err)
		}
	}
	if _, err := locker.Resolve("k", locker.WithTTL(locker.MaxTTL)); err != nil {
		t.Errorf("TTL of exactly MaxTTL: %v", err)
	}
	for _, owner := range []string{"", "a\x00", "\xff"} {
		if _, err := locker.Resolve("k", locker.WithOwner(owner)); !errors.Is(err, locker.ErrInvalidOwner) {
			t.Errorf("owner %q: %v, want ErrInvalidOwner", owner, err)
		}
	}
	if _, err := locker.Resolve(""); !errors.Is(err, locker.ErrInvalidKey) {
		t.Errorf("empty key: %v", err)
	}
}

func TestUnavailable(t *testing.T) {
	cause := errors.New("dial tcp: refused")
	err := locker.Unavailable(cause)
	if !errors.Is(err, locker.ErrUnavailable) || !errors.Is(err, cause) {
		t.Errorf("Unavailable(cause) = %v: must match ErrUnavailable and the cause", err)
	}
	if locker.Unavailable(nil) != nil {
		t.Error("Unavailable(nil) != nil")
	}
	if again := locker.Unavailable(err); again != err {
		t.Errorf("wrapping twice changed the error: %v", again)
	}
}

func TestOpenUnknownScheme(t *testing.T) {
	scheme := "test-" + strings.ToLower(rand.Text()) // a scheme of its own each run (-count)
	locker.Register(scheme, func(context.Context, *url.URL) (locker.Locker, error) { return nil, nil })
	_, err := locker.Open(context.Background(), "nope://user:secret@host/x")
	if !errors.Is(err, locker.ErrUnknownScheme) {
		t.Fatalf("Open = %v, want ErrUnknownScheme", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, scheme) {
		t.Errorf("error %q does not list the known schemes", msg)
	}
	if strings.Contains(msg, "secret") {
		t.Errorf("error %q shows the password", msg)
	}
	if _, err := locker.Open(context.Background(), "redis://u:secret@host:1/%zz"); !errors.Is(err, locker.ErrInvalidURL) || strings.Contains(err.Error(), "secret") {
		t.Errorf("unparsable URL: %v", err)
	}
}

func TestRegisterTwicePanics(t *testing.T) {
	open := func(context.Context, *url.URL) (locker.Locker, error) { return nil, nil }
	scheme := "twice-" + strings.ToLower(rand.Text())
	locker.Register(scheme, open)
	defer func() {
		if recover() == nil {
			t.Error("second Register of a scheme did not panic")
		}
	}()
	locker.Register(strings.ToUpper(scheme), open)
}
