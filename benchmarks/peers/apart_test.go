package peers

import (
	"net/url"
	"testing"

	gormpostgres "gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/locker-go/locker"
	lsql "github.com/locker-go/locker/adapters/sql"
)

// pgOursApart is our adapter on a pool of its own, as in a process of its
// own: its waiters are woken by other clients' releases through NOTIFY on
// its own LISTEN connection, where ours' clients share one process's pool
// and the release hands the key to a waiter of the process in its answer.
func pgOursApart(tb testing.TB, u *url.URL) locker.Locker {
	return oursOnPool(tb, gormpostgres.Open(u.String()))
}

// oursOnPool is our adapter on a pool of its own, opened by dialector.
func oursOnPool(tb testing.TB, dialector gorm.Dialector) locker.Locker {
	db, err := gorm.Open(dialector, &gorm.Config{Logger: logger.Discard})
	if err != nil {
		tb.Fatal(err)
	}
	l, err := lsql.New(db)
	if err != nil {
		tb.Fatal(err)
	}
	sqlDB, _ := db.DB()
	cleanup(tb, sqlDB.Close) // after the suite closes l
	return l
}
