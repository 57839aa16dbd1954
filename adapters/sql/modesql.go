package sql

import (
	"context"
	dbsql "database/sql"
	"regexp"
	"strconv"
)

// The statements of the modal path (modes.go): plain SQL that every
// dialect runs inside one transaction per call, after lock serializes the
// key. They are written with $n parameters; MySQL's take ? instead, each
// in the order of use (see stmt).
//
// Tables: the lock table ({t}) keeps one row per key as before, an
// Exclusive holder's, or a header (owner ”) that covers the key's other
// holders until the last of them lapses, so that the Exclusive statements
// (acquire, release, …) see a held key and need no change; the holders
// table ({h}) keeps the Shared and intention holders, one row per owner
// and mode; the queue ({q}) gains each waiter's mode (0, Exclusive, for
// the rows the Exclusive statements write), and Limited holders and
// waiters their Limit (lim, 0 for the others: limit.go).
type modeQueries struct {
	lock    stmt // serializes the key's changes until commit
	state   stmt // $1 key: (kind 0 header, 1 holder, 2 waiter; owner or token; mode; fence; holds; ids; ms left; seq; lim)
	draw    stmt // a new fence (MySQL: drawn by drawSet first)
	drawSet stmt
	notify  stmt // Postgres: wake the waiters $1 (tokens, space-separated) at commit

	addHeader, setHeader, dropHeader  stmt
	addHolder, setHolder, dropHolder  stmt
	gcHolders, dropShared             stmt // dropShared: the Shared and Limited holders
	enqueue, touch, dequeue, gcQueue  stmt // enqueue, touch: $1 key, $2 token, $3 mode, $4 ttl ms, $5 lim, $6 owner
	infoShared, infoSharedByKey, byKP stmt // the live Shared and Limited holders (and mode, lim): all, of $1, of keys beginning with $1
	ownerMode                         stmt // $1 key, $2 owner: the mode of its live holder in the holders table
	limitTaken                        stmt // $1 key, $2 token: the live Limited holders and Limited waiters before $2's place

	// The fast lane (modefast.go), where the dialect has one: grantFast
	// ($1 key, $2 owner, $3 id, $4 mode, $5 compatible modes, $6 ttl ms,
	// $7 the call's place or "") returns the new fence, releaseFast ($1 key, $2 owner, $3 mode,
	// $4 fence, $5 id) 1, or 2 if the key is free, or 3 if waiters may go
	// (MySQL; Postgres wakes them itself); NULL: declined. grantLimited
	// ($1 key, $2 owner, $3 id, $4 ttl ms, $5 Limit, $6 the call's place
	// or "") is grantFast's for a Limited request, where the lane decides
	// them: the fence, or minus the ms to wait and the place's seq; its
	// releaseFast then releases Limited holds too.
	grantFast, releaseFast, grantLimited stmt

	// handDirect ($1 key, $2 owner, $3 fence or 0, $4 hold id, $5 the
	// waiter's owner, $6 its ID, $7 its TTL ms), where the dialect has
	// one (SQLite): the key's row, held by the hold alone, given to the
	// waiter (an Exclusive one) with a new fence if its place heads the
	// key's queue and nobody holds the key otherwise; the fence, or no
	// row (handdirect.go).
	handDirect stmt
}

// newModeQueries fills in the modal statements with fill, and with the
// dialect's own lock, draw and enqueue; positional turns $n into ?.
func newModeQueries(fill func(string) string, positional bool, lock, draw, drawSet, notify, enqueue string) modeQueries {
	s := func(q string) stmt {
		if q == "" {
			return stmt{}
		}
		return newStmt(fill(q), positional)
	}
	const info = `SELECT {k}, owner, fence, holds, {abs}, mode, lim FROM {h} WHERE mode IN (1, 4) AND expires_at > {now}`
	return modeQueries{
		lock: s(lock),
		state: s(`SELECT 0, owner, 0, fence, holds, ids, {left}, 0, 0 FROM {t} WHERE {k} = $1
UNION ALL SELECT 1, owner, mode, fence, holds, ids, {left}, 0, lim FROM {h} WHERE {k} = $1
UNION ALL SELECT 2, token, mode, 0, 0, '', {left}, seq, lim FROM {q} WHERE {k} = $1`),
		draw:    s(draw),
		drawSet: s(drawSet),
		notify:  s(notify),
		addHeader: s(`INSERT INTO {t} ({k}, owner, fence, holds, ids, expires_at)
VALUES ($1, $2, $3, $4, $5, {now} + $6{ms})`),
		setHeader:  s(`UPDATE {t} SET owner = $2, fence = $3, holds = $4, ids = $5, expires_at = {now} + $6{ms} WHERE {k} = $1`),
		dropHeader: s(`DELETE FROM {t} WHERE {k} = $1`),
		addHolder: s(`INSERT INTO {h} ({k}, owner, mode, fence, holds, ids, expires_at, lim)
VALUES ($1, $2, $3, $4, $5, $6, {now} + $7{ms}, $8)`),
		setHolder:       s(`UPDATE {h} SET holds = $5, ids = $6, expires_at = {now} + $7{ms} WHERE {k} = $1 AND owner = $2 AND mode = $3 AND fence = $4`),
		dropHolder:      s(`DELETE FROM {h} WHERE {k} = $1 AND owner = $2 AND mode = $3 AND fence = $4`),
		gcHolders:       s(`DELETE FROM {h} WHERE {k} = $1 AND expires_at <= {now}`),
		dropShared:      s(`DELETE FROM {h} WHERE {k} = $1 AND mode IN (1, 4)`),
		enqueue:         s(enqueue),
		touch:           s(`UPDATE {q} SET mode = $3, lim = $5, expires_at = {now} + $4{ms} WHERE {k} = $1 AND token = $2`),
		dequeue:         s(`DELETE FROM {q} WHERE {k} = $1 AND token = $2`),
		gcQueue:         s(`DELETE FROM {q} WHERE {k} = $1 AND expires_at <= {now}`),
		infoShared:      s(info),
		infoSharedByKey: s(info + ` AND {k} = $1`),
		byKP:            s(info + ` AND {prefix}`),
		ownerMode:       s(`SELECT mode FROM {h} WHERE {k} = $1 AND owner = $2 AND expires_at > {now}`),
		limitTaken: s(`SELECT (SELECT COUNT(*) FROM {h} WHERE {k} = $1 AND mode = 4 AND expires_at > {now})
	+ (SELECT COUNT(*) FROM {q} WHERE {k} = $1 AND mode = 4 AND expires_at > {now}
		AND seq < (SELECT seq FROM {q} WHERE {k} = $1 AND token = $2))`),
	}
}

// stmt is a statement and, where the database takes ? parameters, the
// order in which it uses the $n arguments. A call may pass arguments that
// one dialect's statement uses and another's does not (the owner of a
// queue place, which only Postgres keeps): those are left out.
type stmt struct {
	q     string
	order []int // nil: $n as given, up to n
	n     int
}

var dollar = regexp.MustCompile(`\$(\d+)`)

func newStmt(q string, positional bool) stmt {
	if !positional {
		s := stmt{q: q}
		for _, m := range dollar.FindAllStringSubmatch(q, -1) {
			n, _ := strconv.Atoi(m[1])
			s.n = max(s.n, n)
		}
		return s
	}
	s := stmt{order: []int{}}
	s.q = dollar.ReplaceAllStringFunc(q, func(m string) string {
		n, _ := strconv.Atoi(m[1:])
		s.order = append(s.order, n-1)
		return "?"
	})
	return s
}

func (s stmt) args(a []any) []any {
	if s.order == nil {
		if s.n > 0 { // else ? parameters, as given
			return a[:min(len(a), s.n)]
		}
		return a
	}
	out := make([]any, len(s.order))
	for i, n := range s.order {
		out[i] = a[n]
	}
	return out
}

// querier is a transaction or the pool.
type querier interface {
	ExecContext(ctx context.Context, q string, args ...any) (dbsql.Result, error)
	QueryContext(ctx context.Context, q string, args ...any) (*dbsql.Rows, error)
	QueryRowContext(ctx context.Context, q string, args ...any) *dbsql.Row
}

func (s stmt) exec(ctx context.Context, db querier, args ...any) error {
	_, err := db.ExecContext(ctx, s.q, s.args(args)...)
	return err
}

func (s stmt) query(ctx context.Context, db querier, args ...any) (*dbsql.Rows, error) {
	return db.QueryContext(ctx, s.q, s.args(args)...)
}

func (s stmt) row(ctx context.Context, db querier, args ...any) *dbsql.Row {
	return db.QueryRowContext(ctx, s.q, s.args(args)...)
}
