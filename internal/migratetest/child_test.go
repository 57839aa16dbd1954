package migratetest_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/locker-go/locker"
	_ "github.com/locker-go/locker/adapters/etcd"
	_ "github.com/locker-go/locker/adapters/redis"
	_ "github.com/locker-go/locker/adapters/sql"
	_ "github.com/locker-go/locker/adapters/zookeeper"
	"github.com/locker-go/locker/conformance/history"
)

// The child half of the tests: a process of one phase. It opens the
// backend URL in LOCKER_MIGRATE_URL (a migrate: URL in phase 2), and two
// clients take the key LOCKER_MIGRATE_KEY in turn, ROUNDS times each,
// adding one to the parent's fenced counter under each lease; then it
// prints its history for the parent and exits.
func init() {
	raw := os.Getenv("LOCKER_MIGRATE_URL")
	if raw == "" {
		return
	}
	out, err := child(raw, os.Getenv("LOCKER_MIGRATE_KEY"), os.Getenv("LOCKER_MIGRATE_COUNTER"), os.Getenv("LOCKER_MIGRATE_ROUNDS"))
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Printf("history %s\n", out)
	os.Exit(0)
}

func child(raw, key, counter, rounds string) ([]byte, error) {
	n, err := strconv.Atoi(rounds)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l, err := locker.Open(ctx, raw)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	rec := history.New()
	errs := make(chan error, 2)
	var wg sync.WaitGroup
	for range 2 {
		c := rec.Client()
		wg.Go(func() {
			for range n {
				if err := round(ctx, c, l, key, counter); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	return rec.Export(ctx)
}

// round takes the key, adds one to the counter with the lease's fence,
// and lets the key go.
func round(ctx context.Context, c *history.Client, l locker.Locker, key, counter string) error {
	lease, err := c.Lock(ctx, l, key, locker.WithTTL(10*time.Second))
	if err != nil {
		return err
	}
	v, err := get(ctx, counter+"/read")
	if err == nil {
		_, err = get(ctx, fmt.Sprintf("%s/write?fence=%d&v=%d", counter, lease.Fence(), v+1))
	}
	if uerr := lease.Unlock(ctx); err == nil {
		err = uerr
	}
	return err
}

// get asks the parent's counter; its answer is a number.
func get(ctx context.Context, u string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(body)))
}

// migrateURL is the phase-2 URL over from and to.
func migrateURL(from, to string) string {
	return "migrate:?from=" + url.QueryEscape(from) + "&to=" + url.QueryEscape(to)
}
