package sql

import (
	"context"

	"github.com/locker-go/locker/driver"
)

// MySQL's first claim of a call that does not queue (claimFirst and the
// fence it draws, which batch sends in one round trip) as one procedure:
// its statements are parsed once per connection, and the queue's look is a
// read of its own, where the INSERT … SELECT's subquery is planned at each
// claim. Lock+unlock of a free key, alternated with the batch (3,000 each,
// this machine's MariaDB 10.11): 331–347 µs against 428–434 µs. The same
// three autocommitted writes as the batch, in the same order, so a claim
// between them looks the same to others (a row without its fence), and a
// duplicate key fails the call as it fails the batch. The look at the
// queue does not lock: a waiter that queues as it runs is passed over, as
// one that queues a moment after would be; the primary key still lets one
// claim in. Where the procedure is not to be had (no CREATE ROUTINE, or
// not this user's to run: myNoLane), claims go by the batch.
const (
	myClaimName = "_claim_v1"
	myClaim     = "CALL `{tn}" + myClaimName + "`(?, ?, ?, ?)"
	myClaimProc = "CREATE PROCEDURE `{tn}" + myClaimName + "`(p_key VARBINARY(512), p_owner VARBINARY(512), p_id VARBINARY(255), p_ttl BIGINT)\n" +
		"BEGIN\n" +
		"	DECLARE w TINYINT DEFAULT 0;\n" +
		"	SELECT EXISTS (SELECT 1 FROM {q} WHERE `key` = p_key AND expires_at > {now}) INTO w;\n" +
		"	IF w = 0 THEN\n" +
		"		INSERT INTO {t} (`key`, owner, fence, holds, ids, expires_at, parked) VALUES (p_key, p_owner, 0, 1, CONCAT(' ', p_id, ' '), {now} + p_ttl, 0);\n" +
		"		UPDATE `{tn}_fence` SET v = LAST_INSERT_ID(v + 1) WHERE id = 1;\n" +
		"		UPDATE {t} SET fence = LAST_INSERT_ID() WHERE `key` = p_key AND owner = p_owner AND fence = 0 AND ids = CONCAT(' ', p_id, ' ');\n" +
		"	END IF;\n" +
		// ROW_COUNT: the last UPDATE's, 1 if the claim took its fence
		"	SELECT IF(w = 0, LAST_INSERT_ID(), 0), IF(w = 0, ROW_COUNT(), 0);\n" +
		"END"
)

// claimByProc is claim's first attempt for a call that does not queue,
// through myClaimProc: done false where the procedure is not to be had
// (from then on), for the batch to claim.
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
