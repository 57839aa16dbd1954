package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/locker-go/locker/internal/testenv"
)

// Several `locker run` processes increment an unprotected file counter
// (read, pause, write): any overlap of two holders loses an update.
func TestAcceptanceCounterOnDefault(t *testing.T) {
	t.Parallel()
	counterRace(t, testEnv(t))
}

func TestAcceptanceCounterOnRedis(t *testing.T) {
	t.Parallel()
	u := testenv.URL(t, "LOCKER_TEST_REDIS")
	counterRace(t, testEnv(t, "LOCKER_BACKEND="+u.String()))
}

func counterRace(t *testing.T, env []string) {
	const workers, rounds = 4, 8
	file := filepath.Join(t.TempDir(), "counter")
	if err := os.WriteFile(file, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	key := uniqueKey(t)
	script := `n=$(cat "$1"); sleep 0.02; echo $((n + 1)) > "$1"`
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range rounds {
				r := cli(t, env, "run", key, "--", "sh", "-c", script, "sh", file)
				if r.code != 0 {
					t.Errorf("locker run: exit %d: %s", r.code, r.stderr)
					return
				}
			}
		})
	}
	wg.Wait()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err != nil || n != workers*rounds {
		t.Fatalf("counter = %q, want %d: an update was lost", b, workers*rounds)
	}
}
