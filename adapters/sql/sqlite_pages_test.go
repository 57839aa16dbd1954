//go:build unix

package sql

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/testenv"
)

// SQLite's allocator keeps its pages (keepPages): shared locks and their
// releases, run again and again, fault in far less fresh memory than in a
// process without keepPages, where each run mapped pages of 1 MiB, faulted
// them in and unmapped them. The two runs are child processes, since
// keepPages lasts for the process.
func TestSQLiteKeepsItsPages(t *testing.T) {
	if mode := os.Getenv("LOCKER_PAGES_CHILD"); mode != "" {
		if mode == "off" {
			keepPages = func() {}
		}
		os.Stdout.WriteString("faults " + strconv.FormatInt(sharedRunFaults(t, 300), 10) + "\n")
		return
	}
	if testenv.Race {
		t.Skip("under -race the detector's own page faults blur the count (a loaded CI run: 6.0k kept against 8.9k off); scripts/test runs it without the detector")
	}
	run := func(mode string) int64 {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestSQLiteKeepsItsPages$", "-test.count=1")
		cmd.Env = append(os.Environ(), "LOCKER_PAGES_CHILD="+mode)
		out, err := cmd.CombinedOutput()
		_, after, ok := strings.Cut(string(out), "faults ")
		n, perr := strconv.ParseInt(strings.Fields(after + " x")[0], 10, 64)
		if err != nil || !ok || perr != nil {
			t.Fatalf("child %s: %v\n%s", mode, err, out)
		}
		return n
	}
	kept, off := run("keep"), run("off")
	t.Logf("page faults in 300 shared lock+unlock runs: %d with the pages kept, %d without", kept, off)
	if kept*3/2 > off {
		t.Fatalf("%d page faults with SQLite's pages kept, %d without: keepPages saves nothing", kept, off)
	}
}

// sharedRunFaults is the minor page faults of this process over n shared
// lock+unlock runs on a new SQLite file, after a warm-up.
func sharedRunFaults(t *testing.T, n int) int64 {
	l, err := Open(t.Context(), "sqlite://"+filepath.ToSlash(filepath.Join(t.TempDir(), "pages.db")))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cycle := func(n int) {
		for range n {
			lease, err := l.Lock(t.Context(), "k", locker.Shared(), locker.WithKeepAlive(false))
			if err != nil {
				t.Fatal(err)
			}
			if err := lease.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	}
	faults := func() int64 {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return ru.Minflt
	}
	cycle(50) // warm: the pages, the Go heap
	runtime.GC()
	before := faults()
	cycle(n)
	return faults() - before
}
