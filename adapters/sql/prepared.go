package sql

import (
	"context"
	dbsql "database/sql"
	"reflect"

	"github.com/locker-go/locker/internal/perproc"
)

// prepared holds the dialect's statements prepared on the pool, by text,
// where preparing pays (SQLite: parsing a statement costs more than
// running it, and the driver parses one that is not prepared at every
// run). A transaction runs them through Tx.StmtContext, which reuses the
// statement prepared on the transaction's connection (or prepares it on
// a new one, keeping it for the next). A statement missing here runs
// unprepared, as everywhere else.
type prepared struct {
	m map[string]*dbsql.Stmt
}

// preparedKey is what a prepared set serves: a database handle, and a
// table (its statements name it).
type preparedKey struct {
	db    *dbsql.DB
	table string
}

// preparedSets are the prepared sets of this process: the drivers on one
// database handle and table share one, so that 400 Lockers opened on one
// URL keep each statement prepared once, not 400 times.
var preparedSets perproc.Map[preparedKey, *prepared]

// prepareShared returns the prepared set of d's database handle and
// table, and the func that lets it go.
func prepareShared(ctx context.Context, db *dbsql.DB, d *sqlDriver) (*prepared, func(), error) {
	return preparedSets.Get(ctx, preparedKey{db, d.cfg.table}, func() (*prepared, error) {
		return prepare(ctx, db, d.dialect), nil
	}, (*prepared).close)
}

// prepare prepares every statement of the dialect (its queries and modal
// statements) that db takes; one it refuses is left to run unprepared.
func prepare(ctx context.Context, db *dbsql.DB, dl *dialect) *prepared {
	p := &prepared{m: map[string]*dbsql.Stmt{}}
	for _, q := range statementsOf(reflect.ValueOf(dl.q), reflect.ValueOf(dl.mq)) {
		if _, ok := p.m[q]; ok || q == "" {
			continue
		}
		if s, err := db.PrepareContext(ctx, q); err == nil {
			p.m[q] = s
		}
	}
	return p
}

// statementsOf lists the statement texts of structs of strings and stmts.
func statementsOf(vs ...reflect.Value) []string {
	var out []string
	for _, v := range vs {
		for i := range v.NumField() {
			switch f := v.Field(i); {
			case f.Kind() == reflect.String:
				out = append(out, f.String())
			case f.Type() == reflect.TypeFor[stmt]():
				out = append(out, f.Field(0).String())
			}
		}
	}
	return out
}

// close closes the prepared statements.
func (p *prepared) close() {
	if p == nil {
		return
	}
	for _, s := range p.m {
		_ = s.Close()
	}
}

// in returns tx as a querier that runs the statements prepared, each
// through Tx.StmtContext.
func (p *prepared) in(tx *dbsql.Tx) querier {
	if p == nil {
		return tx
	}
	return preparedQuerier{tx, p, tx.StmtContext}
}

// on returns db as a querier that runs the statements prepared.
func (p *prepared) on(db *dbsql.DB) querier {
	if p == nil {
		return db
	}
	return preparedQuerier{db, p, func(_ context.Context, s *dbsql.Stmt) *dbsql.Stmt { return s }}
}

// pool is d's connection pool as a querier: its prepared statements, where
// it keeps them.
func (d *sqlDriver) pool() querier { return d.prep.on(d.db) }

// preparedQuerier is a transaction or pool (q) that runs the statements
// p has prepared, as bind makes them its own, and the others as q does.
type preparedQuerier struct {
	q    querier
	p    *prepared
	bind func(ctx context.Context, s *dbsql.Stmt) *dbsql.Stmt
}

// stmt is q's prepared statement, or nil.
func (x preparedQuerier) stmt(ctx context.Context, q string) *dbsql.Stmt {
	if s, ok := x.p.m[q]; ok {
		return x.bind(ctx, s)
	}
	return nil
}

func (x preparedQuerier) ExecContext(ctx context.Context, q string, args ...any) (dbsql.Result, error) {
	if s := x.stmt(ctx, q); s != nil {
		return s.ExecContext(ctx, args...)
	}
	return x.q.ExecContext(ctx, q, args...)
}

func (x preparedQuerier) QueryContext(ctx context.Context, q string, args ...any) (*dbsql.Rows, error) {
	if s := x.stmt(ctx, q); s != nil {
		return s.QueryContext(ctx, args...)
	}
	return x.q.QueryContext(ctx, q, args...)
}

func (x preparedQuerier) QueryRowContext(ctx context.Context, q string, args ...any) *dbsql.Row {
	if s := x.stmt(ctx, q); s != nil {
		return s.QueryRowContext(ctx, args...)
	}
	return x.q.QueryRowContext(ctx, q, args...)
}
