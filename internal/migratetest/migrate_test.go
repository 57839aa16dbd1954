package migratetest_test

import (
	"bufio"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/locker-go/locker/conformance/history"
	"github.com/locker-go/locker/internal/testenv"
)

// The schedule of a move: three process slots, each in a phase (1: on
// from; 2: on Migration(from, to); 3: on to), moving one at a time, so
// that phase-1 and phase-2 processes run together, then phase-2 and
// phase-3 ones. Each step starts a fresh process per slot.
var schedule = [][3]int{{1, 1, 1}, {2, 1, 1}, {2, 2, 1}, {2, 2, 2}, {3, 2, 2}, {3, 3, 2}, {3, 3, 3}}

// rounds is each client's number of lock rounds per process.
const rounds = 10

// Processes move between two backends through the three phases while
// they contend for one key: the fenced counter loses no update and refuses
// no write (no two holders, no fence going back), and the history of every
// process together is linearizable with fences rising throughout.
func TestMoveAcrossProcesses(t *testing.T) {
	redisURL := func(t *testing.T) string { return testenv.URL(t, "LOCKER_TEST_REDIS").String() }
	postgres := func(t *testing.T) string { return testenv.URL(t, "LOCKER_TEST_POSTGRES").String() }
	pairs := []struct {
		name     string
		from, to func(t *testing.T) string
	}{
		{"redis-to-etcd", redisURL, func(t *testing.T) string { return testenv.URL(t, "LOCKER_TEST_ETCD").String() }},
		{"zookeeper-to-postgres", func(t *testing.T) string { return testenv.URL(t, "LOCKER_TEST_ZK").String() }, postgres},
		{"postgres-to-redis", postgres, redisURL},
		{"sqlite-to-redis", func(t *testing.T) string {
			return "sqlite://" + filepath.ToSlash(filepath.Join(t.TempDir(), "from.db"))
		}, redisURL},
		{"mysql-to-postgres", func(t *testing.T) string { return testenv.URL(t, "LOCKER_TEST_MYSQL").String() }, postgres},
		{"redis-to-a-second-redis", redisURL, func(t *testing.T) string {
			return "redis://" + testenv.StartRedis(t, 0).Addr
		}},
	}
	for _, p := range pairs {
		t.Run(p.name, func(t *testing.T) { move(t, p.from(t), p.to(t)) })
	}
}

// move runs the schedule from one backend to the other and checks it.
func move(t *testing.T, from, to string) {
	key := "migrate-" + rand.Text()
	c := newCounter(t)
	rec := history.New()
	urls := map[int]string{1: from, 2: migrateURL(from, to), 3: to}
	for _, step := range schedule {
		var wg sync.WaitGroup
		for _, phase := range step {
			wg.Go(func() {
				data, err := runChild(urls[phase], key, c.url)
				if err == nil {
					err = rec.Import(data)
				}
				if err != nil {
					t.Errorf("a phase-%d process: %v", phase, err)
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
	}
	want := len(schedule) * 3 * 2 * rounds
	if v, accepted := c.Exact(); v != want || accepted != want || c.refused.Load() != 0 {
		t.Fatalf("counter %d, %d writes accepted, %d refused (a fence below the last); want %d, %d, 0",
			v, accepted, c.refused.Load(), want, want)
	}
	if err := rec.Check(t.Context()); err != nil {
		history.WriteArtifact(t, err)
		t.Fatal(err)
	}
}

// runChild runs one phase's process and returns its history.
func runChild(raw, key, counter string) ([]byte, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "LOCKER_MIGRATE_URL="+raw, "LOCKER_MIGRATE_KEY="+key,
		"LOCKER_MIGRATE_COUNTER="+counter, "LOCKER_MIGRATE_ROUNDS="+strconv.Itoa(rounds))
	out, err := cmd.Output()
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "history "); ok {
			return []byte(data), nil
		}
	}
	if err == nil {
		err = errors.New("no history")
	}
	return nil, fmt.Errorf("%w: %s", err, out)
}

// counter is the parent's fenced counter, served to the children.
type counter struct {
	history.FencedCounter
	refused atomic.Int64
	url     string
}

func newCounter(t *testing.T) *counter {
	c := &counter{}
	mux := http.NewServeMux()
	mux.HandleFunc("/read", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, c.Read()) })
	mux.HandleFunc("/write", func(w http.ResponseWriter, r *http.Request) {
		fence, err1 := strconv.ParseUint(r.URL.Query().Get("fence"), 10, 64)
		v, err2 := strconv.Atoi(r.URL.Query().Get("v"))
		if err := errors.Join(err1, err2); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if !c.Write(fence, v) {
			c.refused.Add(1)
			fmt.Fprintln(w, 0)
			return
		}
		fmt.Fprintln(w, 1)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c.url = srv.URL
	return c
}
