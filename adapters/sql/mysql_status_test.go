package sql_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/internal/testenv"
)

// A claim caught between its two statements (MySQL without multiStatements
// inserts the row, then gives it its fence) is not a holder yet: Status
// and List leave it out, as they would a Lock that has not returned. An
// observer reading it reported a leader with fence 0 (ElectionLeaderCrash,
// in a full run).
func TestMySQLStatusSkipsAnUnfencedClaim(t *testing.T) {
	t.Parallel()
	u := testenv.URL(t, "LOCKER_TEST_MYSQL")
	pass, _ := u.User.Password()
	db := openDB(t, "mysql", fmt.Sprintf("%s:%s@tcp(%s)%s", u.User.Username(), pass, u.Host, u.Path))
	l := open(t, u.String())
	defer l.Close()
	ctx := context.Background()
	prefix := fmt.Sprintf("unfenced-%d/", time.Now().UnixNano())
	key := prefix + "k"
	listAll(t, l) // the tables exist
	if _, err := db.ExecContext(ctx, "INSERT INTO locker_locks (`key`, owner, fence, holds, ids, expires_at) "+
		"VALUES (?, 'claimant', 0, 1, ' id ', (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000) + 60000)", key); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DELETE FROM locker_locks WHERE `key` = ?", key) })
	adm := l.(locker.Admin)
	if info, err := adm.Status(ctx, key); !errors.Is(err, locker.ErrNotHeld) {
		t.Errorf("Status of a claim without its fence = %+v, %v; want ErrNotHeld", info, err)
	}
	infos, err := adm.List(ctx, prefix)
	if err != nil || len(infos) != 0 {
		t.Errorf("List of a claim without its fence = %+v, %v; want nothing", infos, err)
	}
}
