package sql_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/locker-go/locker"
)

// The child half of TestSQLiteAcrossProcesses: lock the key, print its
// fence, and on "unlock" from stdin unlock and exit; killed, it unlocks nothing.
func init() {
	raw := os.Getenv("LOCKER_SQL_TEST_CHILD")
	if raw == "" {
		return
	}
	ctx := context.Background()
	l, err := locker.Open(ctx, raw)
	if err == nil {
		var lease locker.Lease
		if lease, err = l.TryLock(ctx, "across-processes", locker.WithTTL(time.Second)); err == nil {
			fmt.Printf("fence %d\n", lease.Fence())
			if line, _ := bufio.NewReader(os.Stdin).ReadString('\n'); line == "unlock\n" {
				err = lease.Unlock(ctx)
			}
		}
	}
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// A lock held by another process is refused, then free once that process
// unlocks, or, killed, once its TTL lapses; fences keep rising.
func TestSQLiteAcrossProcesses(t *testing.T) {
	raw := "sqlite://" + filepath.ToSlash(filepath.Join(t.TempDir(), "shared.db"))
	l := open(t, raw)
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	last := uint64(0)
	for _, how := range []string{"unlock", "kill"} {
		child, stdin, fence := startChild(t, raw)
		if fence <= last {
			t.Errorf("%s: child's fence %d is not above %d", how, fence, last)
		}
		if _, err := l.TryLock(ctx, "across-processes"); !errors.Is(err, locker.ErrLocked) {
			t.Fatalf("%s: TryLock while another process holds the key = %v, want ErrLocked", how, err)
		}
		got := make(chan locker.Lease, 1)
		go func() {
			lease, err := l.Lock(ctx, "across-processes")
			if err != nil {
				t.Error(err)
			}
			got <- lease
		}()
		if how == "unlock" {
			fmt.Fprintln(stdin, "unlock")
		} else if err := child.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = child.Wait()
		lease := <-got
		if lease == nil {
			t.FailNow()
		}
		if lease.Fence() <= fence {
			t.Errorf("%s: fence %d after the child is not above the child's %d", how, lease.Fence(), fence)
		}
		last = lease.Fence()
		if err := lease.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// startChild runs this test binary as a process that locks the key, and
// returns once it holds it.
func startChild(t *testing.T, raw string) (*exec.Cmd, *os.File, uint64) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "LOCKER_SQL_TEST_CHILD="+raw)
	cmd.Stderr = os.Stderr
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin = r
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	t.Cleanup(func() { w.Close(); _ = cmd.Process.Kill() })
	line, err := bufio.NewReader(out).ReadString('\n')
	f, ok := strings.CutPrefix(strings.TrimSpace(line), "fence ")
	fence, perr := strconv.ParseUint(f, 10, 64)
	if err != nil || !ok || perr != nil {
		t.Fatalf("child: %q, %v", line, err)
	}
	return cmd, w, fence
}
