package mem

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/locker-go/locker"
)

func TestOpen(t *testing.T) {
	ctx := context.Background()
	for _, bad := range []string{"mem://u:secret@x", "mem://x:1", "mem://x/path", "mem://x?ttl=1", "mem:opaque"} {
		if _, err := locker.Open(ctx, bad); !errors.Is(err, locker.ErrInvalidURL) || strings.Contains(err.Error(), "secret") {
			t.Errorf("Open(%q) = %v; want ErrInvalidURL, no password", bad, err)
		}
	}
	a, err := locker.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, _ := locker.Open(ctx, "mem:///")
	defer b.Close()
	held, err := a.TryLock(ctx, "open-test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryLock(ctx, "open-test"); !errors.Is(err, locker.ErrLocked) {
		t.Errorf("mem:// and mem:/// are not the same default space: TryLock = %v", err)
	}
	_ = held.Unlock(ctx)
}
