package sql

import (
	"context"

	"github.com/locker-go/locker/driver"
)

// MySQL's claim for a call that does not queue (the statements claimFirst
// and the fence's draw, which batch sends in one round trip) as one call of
// a procedure: one statement and one answer where the batch's four each
// answer. The same autocommitted writes in the same order, and the queue's
// look in the claim's INSERT … SELECT as there (at REPEATABLE READ it locks
// the key's places it reads, so a waiter that queues meanwhile waits for
// the claim, and its mark then finds the claim's row), so that others see
// a claim between them as they see the batch's (a row without its fence),
// and a duplicate key fails the call as it fails the batch. The fence is
// given only if the counter row gave one. Lock+unlock of a free key,
// alternated with the batch (3,000 each, MariaDB 10.11 here): 316–318 µs
// against 389–415. Where the procedure is not to be had (no CREATE
// ROUTINE, or not this user's to run: myNoLane), claims go by the
// statements, batched where the connection takes several.
const (
	myClaimName = "_claim_v2"
	myClaim     = "CALL `{tn}" + myClaimName + "`(?, ?, ?, ?)"
	myClaimProc = "CREATE PROCEDURE `{tn}" + myClaimName + "`(p_key VARBINARY(512), p_owner VARBINARY(512), p_id VARBINARY(255), p_ttl BIGINT)\n" +
		"BEGIN\n" +
		"	DECLARE f BIGINT UNSIGNED DEFAULT 0;\n" +
		"	DECLARE n BIGINT DEFAULT 0;\n" +
		"	INSERT INTO {t} (`key`, owner, fence, holds, ids, expires_at, parked) SELECT p_key, p_owner, 0, 1, CONCAT(' ', p_id, ' '), {now} + p_ttl, 0 " +
		"FROM DUAL WHERE NOT EXISTS (SELECT 1 FROM {q} WHERE `key` = p_key AND expires_at > {now});\n" +
		"	IF ROW_COUNT() > 0 THEN\n" +
		"		UPDATE `{tn}_fence` SET v = LAST_INSERT_ID(v + 1) WHERE id = 1;\n" +
		"		IF ROW_COUNT() > 0 THEN\n" +
		"			SET f = LAST_INSERT_ID();\n" +
		"			UPDATE {t} SET fence = f WHERE `key` = p_key AND owner = p_owner AND fence = 0 AND ids = CONCAT(' ', p_id, ' ');\n" +
		"			SET n = ROW_COUNT();\n" +
		"		END IF;\n" +
		"	END IF;\n" +
		// n: 1 if the claim took its fence
		"	SELECT f, n;\n" +
		"END"
)

// claimByProc claims for a call that does not queue through myClaimProc:
// done false where the procedure is not to be had (from then on), for the
// statements to claim.
func (m *myStatements) claimByProc(ctx context.Context, d *sqlDriver, r *driver.Request) (fence uint64, fenced, done bool, err error) {
	if d.claimOff.Load() {
		return 0, false, false, nil
	}
	var n int64
	err = row(d.db.QueryRowContext(ctx, m.claimProc, r.Key, r.Owner, r.ID, r.TTL.Milliseconds()), &fence, &n)
	if myNoLane(err) {
		d.claimOff.Store(true)
		return 0, false, false, nil
	}
	return fence, n > 0, true, err
}
