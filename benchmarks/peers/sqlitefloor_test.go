package peers

import (
	"context"
	dbsql "database/sql"
	"runtime"
	"sync"
	"testing"

	"github.com/locker-go/locker"
)

// sqliteDSN opens a SQLite file as our adapter does: WAL, synchronous
// NORMAL (no fsync at a commit), transactions that take the write lock
// as they begin.
const sqliteDSN = "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"

// sqliteRowFloorClient is rowFloorClient on SQLite: a release records the
// next holder with one autocommitted UPDATE of a row (the waiter's own),
// and wakes it in the process. No lock that keeps its holder in a SQLite
// table hands it over with less.
func sqliteRowFloorClient(tb testing.TB, path string) locker.Locker {
	db, id, granted := sqliteFloorConn(tb, path, "peers_floor_row")
	return localFloor{id: id, granted: granted, wake: wakeHere,
		write: func(ctx context.Context, next string) error {
			_, err := db.ExecContext(ctx, "UPDATE peers_floor_row SET n = n + 1 WHERE id = ?", next)
			return err
		},
	}.client()
}

// sqliteFencedFloorClient is myFencedFloorClient on SQLite: a refused
// waiter takes its place in a table before it waits, and a release, in
// one statement, draws a fence from a counter row, records it in the
// next holder's row and deletes that waiter's place. Ours writes the same
// three rows a hand-off, in the same way, and reads the queue's head and
// checks the holder besides.
func sqliteFencedFloorClient(tb testing.TB, path string) locker.Locker {
	db, id, granted := sqliteFloorConn(tb, path, "peers_floor_held")
	return localFloor{id: id, granted: granted, wake: wakeHere,
		place: func(ctx context.Context) error {
			_, err := db.ExecContext(ctx, "INSERT OR IGNORE INTO peers_floor_place (id) VALUES (?)", id)
			return err
		},
		// One statement, as ours (three, in a transaction, made a
		// hand-off 2-3× as long here, 0.27-0.31 ms against 0.09-0.13: on
		// SQLite a statement costs more than the writes it makes), that
		// draws the fence as it writes the next holder's row; triggers
		// (sqliteFloorConn) give the counter its value and take the place.
		write: func(ctx context.Context, next string) error {
			_, err := db.ExecContext(ctx, "UPDATE peers_floor_held SET n = (SELECT v + 1 FROM peers_floor_fence WHERE id = 1) WHERE id = ?", next)
			return err
		},
	}.client()
}

// wakeHere is wakeLocal, and lets the woken waiter run at once, as ours
// does (handOver): woken onto the waker's processor, it would wait until
// the waker blocks, where SQLite's statements are all CPU.
func wakeHere(next string) error {
	err := wakeLocal(next)
	runtime.Gosched()
	return err
}

// sqliteFloorDBs are the floor clients' handles, one per file, as ours
// shares one among the Lockers of a process: a handle's page cache stays
// valid across its own writes, where another handle's write makes it read
// its pages again. The last client to end closes it.
var sqliteFloorDBs = struct {
	sync.Mutex
	m map[string]*sqliteFloorDB
}{m: map[string]*sqliteFloorDB{}}

type sqliteFloorDB struct {
	db      *dbsql.DB
	clients int
}

// sqliteFloorHandle is the shared handle on the file at path, until tb ends.
func sqliteFloorHandle(tb testing.TB, path string) *dbsql.DB {
	f := &sqliteFloorDBs
	f.Lock()
	defer f.Unlock()
	h := f.m[path]
	if h == nil {
		db, err := dbsql.Open("sqlite", path+sqliteDSN)
		if err != nil {
			tb.Fatal(err)
		}
		db.SetMaxOpenConns(1)
		h = &sqliteFloorDB{db: db}
		f.m[path] = h
	}
	h.clients++
	tb.Cleanup(func() {
		f.Lock()
		defer f.Unlock()
		if h.clients--; h.clients == 0 {
			delete(f.m, path)
			_ = h.db.Close()
		}
	})
	return h.db
}

// sqliteFloorConn is a SQLite floor client's handle on the file at path
// (shared: sqliteFloorHandle), the floors' tables made, and its id (its
// row made in table, the row floor's or the fenced floor's, whose
// triggers write the counter and take the place) and wake-up
// (localWaiter).
func sqliteFloorConn(tb testing.TB, path, table string) (*dbsql.DB, string, <-chan struct{}) {
	db := sqliteFloorHandle(tb, path)
	for _, q := range []string{
		"CREATE TABLE IF NOT EXISTS peers_floor_row (id TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID",
		"CREATE TABLE IF NOT EXISTS peers_floor_held (id TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID",
		"CREATE TABLE IF NOT EXISTS peers_floor_place (id TEXT PRIMARY KEY) WITHOUT ROWID",
		"CREATE TABLE IF NOT EXISTS peers_floor_fence (id INTEGER PRIMARY KEY, v INTEGER NOT NULL)",
		"INSERT OR IGNORE INTO peers_floor_fence (id, v) VALUES (1, 0)",
		`CREATE TRIGGER IF NOT EXISTS peers_floor_fenced AFTER UPDATE OF n ON peers_floor_held BEGIN
			UPDATE peers_floor_fence SET v = NEW.n WHERE id = 1;
			DELETE FROM peers_floor_place WHERE id = NEW.id;
		END`,
	} {
		if _, err := db.Exec(q); err != nil {
			tb.Fatal(err)
		}
	}
	id, granted := localWaiter(tb)
	if _, err := db.Exec("INSERT INTO "+table+" (id, n) VALUES (?, 0)", id); err != nil {
		tb.Fatal(err)
	}
	return db, id, granted
}
