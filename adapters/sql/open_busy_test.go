package sql_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/locker-go/locker"
)

// The child half of TestSQLiteOpenedAtOnce: open the database, lock and
// unlock a key, close, 20 times over, as short-lived processes do.
func init() {
	raw := os.Getenv("LOCKER_SQL_TEST_OPEN")
	if raw == "" {
		return
	}
	ctx := context.Background()
	for range 20 {
		l, err := locker.Open(ctx, raw)
		if err == nil {
			var lease locker.Lease
			if lease, err = l.Lock(ctx, "k"); err == nil {
				err = lease.Unlock(ctx)
			}
			_ = l.Close()
		}
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
	}
	os.Exit(0)
}

// Processes that open and close one SQLite file at the same moments all
// get in: switching to WAL, and the checkpoint of the last connection to
// close, lock the file in ways SQLite's busy timeout does not cover, so the
// opener must retry (as `locker run` processes started together on the
// embedded default do).
func TestSQLiteOpenedAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	dir := t.TempDir()
	for round := range 3 {
		raw := "sqlite://" + filepath.ToSlash(filepath.Join(dir, fmt.Sprintf("at-once-%d.db", round)))
		var wg sync.WaitGroup
		for range 6 {
			wg.Go(func() {
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(), "LOCKER_SQL_TEST_OPEN="+raw)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("round %d: a process opening the new file at once: %v: %s", round, err, out)
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
	}
}
