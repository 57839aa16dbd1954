package sql

import (
	"context"
	"encoding/json"

	"github.com/locker-go/locker"
	"github.com/locker-go/locker/driver"
)

var _ driver.BatchRefresher = (*sqlDriver)(nil)

// refreshBatchMax bounds the holds of one batch statement. The portable
// Locker sends at most 1,000 at a time; on MySQL a statement of 1,000 is
// 6,000 placeholders (the limit is 65,535) and a few hundred kB. Postgres
// and SQLite take the holds in one JSON parameter: no placeholder limit.
const refreshBatchMax = 1000

// The batch statements, Postgres and SQLite: $1 is a JSON array of the
// holds, {"k": key, "o": owner, "f": fence, "i": " id ", "t": TTL ms}, sent
// as text (whatever a driver makes of a json parameter), no key twice, so
// that each row joins one hold at most (with two, which one an UPDATE …
// FROM applies is unspecified). The match is refresh's, and sits in the
// UPDATE's WHERE, so that Postgres checks it again against a row changed
// while the statement waited for it. It returns the key of each row it
// extended: its hold is ours.
const (
	pgRefreshBatch = `UPDATE {t} AS l SET expires_at = GREATEST(l.expires_at, {now} + v.t{ms})
FROM json_to_recordset($1::text::json) AS v(k text, o text, f bigint, i text, t bigint)
WHERE l."key" = v.k AND l.owner = v.o AND l.fence = v.f AND strpos(l.ids, v.i) > 0
RETURNING l."key"`
	sqliteRefreshBatch = `UPDATE {t} AS l SET expires_at = max(l.expires_at, {now} + v.t)
FROM (SELECT json_extract(value, '$.k') AS k, json_extract(value, '$.o') AS o, json_extract(value, '$.f') AS f,
	json_extract(value, '$.i') AS i, json_extract(value, '$.t') AS t FROM json_each($1)) AS v
WHERE l."key" = v.k AND l.owner = v.o AND l.fence = v.f AND instr(l.ids, v.i) > 0
RETURNING "key"`
)

// RefreshBatch renews hs as their Refresh would, the Exclusive holds of
// each driver (the plain keys' and the subtree's) a few statements at a
// time: one per refreshBatchMax holds, and one more for each further hold
// of a key already in the batch. A modal hold (its refresh is a
// transaction of its own) or another driver's is declined (ErrSkip). An
// error fails the holds of its statement alone.
func (d *sqlDriver) RefreshBatch(ctx context.Context, hs []driver.Hold) ([]driver.Refreshed, error) {
	out := make([]driver.Refreshed, len(hs))
	d.treeMu.Lock()
	tree := d.tree
	d.treeMu.Unlock()
	groups := map[*sqlDriver][]int{}
	for i, dh := range hs {
		h, ok := dh.(*hold)
		if !ok || h.mode != driver.Exclusive || h.d != d && (tree == nil || h.d != tree) {
			out[i].Err = driver.ErrSkip
			continue
		}
		groups[h.d] = append(groups[h.d], i)
	}
	for t, idx := range groups {
		for _, part := range batches(hs, idx) {
			t.refreshPart(ctx, hs, part, out)
		}
	}
	return out, nil
}

// batches splits idx, indices of holds of hs, into batches of at most
// refreshBatchMax that name no key twice: a key's n-th hold goes in the
// n-th round.
func batches(hs []driver.Hold, idx []int) [][]int {
	var rounds [][]int
	seen := map[string]int{}
	for _, i := range idx {
		k := hs[i].(*hold).key
		n := seen[k]
		seen[k]++
		if n == len(rounds) {
			rounds = append(rounds, nil)
		}
		rounds[n] = append(rounds[n], i)
	}
	var out [][]int
	for _, r := range rounds {
		for len(r) > 0 {
			n := min(len(r), refreshBatchMax)
			out = append(out, r[:n:n])
			r = r[n:]
		}
	}
	return out
}

// refreshPart renews the holds of hs at part in one attempt of the
// dialect's batch statement (retried as Refresh retries), into out. A hold
// that is not ours wakes the key's waiters, as Refresh does.
func (d *sqlDriver) refreshPart(ctx context.Context, hs []driver.Hold, part []int, out []driver.Refreshed) {
	holds := make([]*hold, len(part))
	for j, i := range part {
		holds[j] = hs[i].(*hold)
	}
	var ok []bool
	err := d.retry(ctx, func(ctx context.Context) (err error) {
		ok, err = d.refreshBatchOnce(ctx, d, holds)
		return err
	}, nil)
	for j, i := range part {
		switch h := holds[j]; {
		case err != nil:
			out[i].Err = err
		case !ok[j]:
			h.d.notify(h.key) // the row is not ours: no release of ours will wake the waiters
			out[i].Err = locker.ErrNotHeld
		default:
			h.written()
			out[i].Valid = h.d.valid(h.ttl)
		}
	}
}

// refreshArg is one hold in a batch statement's JSON parameter.
type refreshArg struct {
	K string `json:"k"`
	O string `json:"o"`
	F int64  `json:"f"`
	I string `json:"i"`
	T int64  `json:"t"`
}

// runRefreshBatch is one attempt of q.refreshBatch over hs, which name no
// key twice: ok[j] if hs[j]'s row was extended.
func runRefreshBatch(ctx context.Context, d *sqlDriver, hs []*hold) ([]bool, error) {
	args := make([]refreshArg, len(hs))
	for j, h := range hs {
		args[j] = refreshArg{K: h.key, O: h.owner, F: int64(h.fence), I: " " + h.id + " ", T: h.ttl.Milliseconds()}
	}
	js, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	rows, err := d.pool().QueryContext(ctx, d.q.refreshBatch, string(js))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	extended := map[string]bool{}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, err
		}
		extended[k] = true
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	ok := make([]bool, len(hs))
	for j, h := range hs {
		ok[j] = extended[h.key]
	}
	return ok, nil
}
