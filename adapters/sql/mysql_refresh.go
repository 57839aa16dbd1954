package sql

import (
	"context"
	"strings"
)

// myRefreshBatch is the batch refresh on MySQL and MariaDB, which return
// no rows from an UPDATE: the UPDATE joins the holds (a derived table, no
// key twice, so each row joins one hold at most) with refresh's match. It
// counts the rows it changed, not those it matched; if it changed fewer
// than one per hold (a longer expiry already there, or a hold not ours),
// a read of the keys' rows tells which holds are ours. A row that has the
// hold at the read had it at the UPDATE (a hold, once gone, never comes
// back), so the UPDATE extended it.
type myRefreshBatch struct {
	update, read string // filled in, up to the holds' rows
}

func newMyRefreshBatch(fill func(string) string) myRefreshBatch {
	return myRefreshBatch{
		update: fill("UPDATE {t} l JOIN ("),
		read:   fill("SELECT `key`, owner, fence, ids FROM {t} WHERE `key` IN ("),
	}
}

// myRefreshRow is one hold of the derived table: key, owner, fence, spaced
// id, TTL ms, typed as the columns they meet.
const myRefreshRow = "SELECT CAST(? AS BINARY) AS k, CAST(? AS BINARY) AS o, CAST(? AS UNSIGNED) AS f, CAST(? AS BINARY) AS i, CAST(? AS SIGNED) AS t"

// once is one attempt over hs: ok[j] if hs[j]'s row is ours, extended.
func (m myRefreshBatch) once(ctx context.Context, d *sqlDriver, hs []*hold) ([]bool, error) {
	var q strings.Builder
	q.WriteString(m.update)
	args := make([]any, 0, 5*len(hs))
	keys := make([]any, len(hs))
	for j, h := range hs {
		if j > 0 {
			q.WriteString(" UNION ALL ")
		}
		q.WriteString(myRefreshRow)
		args = append(args, h.key, h.owner, h.fence, " "+h.id+" ", h.ttl.Milliseconds())
		keys[j] = h.key
	}
	q.WriteString(") v ON l.`key` = v.k AND l.owner = v.o AND l.fence = v.f AND INSTR(l.ids, v.i) > 0 " +
		"SET l.expires_at = GREATEST(l.expires_at, " + myNow + " + v.t)")
	res, err := d.db.ExecContext(ctx, q.String(), args...)
	if err != nil {
		return nil, err
	}
	ok := make([]bool, len(hs))
	if n, err := res.RowsAffected(); err != nil || n < int64(len(hs)) {
		return ok, m.mine(ctx, d, hs, keys, ok)
	}
	for j := range ok {
		ok[j] = true
	}
	return ok, nil
}

// mine reads the rows of keys (hs's), setting ok[j] if hs[j]'s is ours.
func (m myRefreshBatch) mine(ctx context.Context, d *sqlDriver, hs []*hold, keys []any, ok []bool) error {
	rows, err := d.db.QueryContext(ctx, m.read+strings.TrimSuffix(strings.Repeat("?, ", len(keys)), ", ")+")", keys...)
	if err != nil {
		return err
	}
	defer rows.Close()
	type row struct {
		owner, ids string
		fence      uint64
	}
	found := map[string]row{}
	for rows.Next() {
		var k string
		var r row
		if err := rows.Scan(&k, &r.owner, &r.fence, &r.ids); err != nil {
			return err
		}
		found[k] = r
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for j, h := range hs {
		r, there := found[h.key]
		ok[j] = there && h.holdsRow(r.owner, r.fence, r.ids)
	}
	return nil
}

// holdsRow reports whether a row of (owner, fence, ids) has h's hold:
// refresh's match, in Go.
func (h *hold) holdsRow(owner string, fence uint64, ids string) bool {
	return owner == h.owner && fence == h.fence && strings.Contains(ids, " "+h.id+" ")
}
