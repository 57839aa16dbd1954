package sql

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/go-sql-driver/mysql"
)

// The MySQL fast lane of the modal path (modefast.go): two procedures,
// each one transaction that locks the key's row as the modal transaction
// does (modeQueries.lock; the release, a live modal header's only, by a
// locking read: without one it declines) and answers with one row. Parameters are named
// p_…: a routine's variables hide columns of the same name. A procedure
// found is kept (myModeProcs): a changed body needs a new name (_v4).
const (
	myGrantFast    = "CALL `{tn}_grant_v3`(?, ?, ?, ?, ?, ?, ?)"
	myGrantLimited = "CALL `{tn}_grantlim_v1`(?, ?, ?, ?, ?, ?)"
	myReleaseFast  = "CALL `{tn}_release_v4`(?, ?, ?, ?, ?)"
	myLockRow      = "INSERT INTO {t} (`key`, owner, fence, holds, ids, expires_at) VALUES (p_key, '', 0, 1, ' ', 0) " +
		"ON DUPLICATE KEY UPDATE `key` = `key`;\n"
	// myFirstGoes: the key's first live waiter is admitted by every live
	// holder left (the release's answer 3: Release wakes this process's
	// first, which looks).
	myFirstGoes = "SELECT 1 FROM {q} w WHERE w.`key` = p_key AND w.expires_at > n " +
		"AND NOT EXISTS (SELECT 1 FROM {q} v WHERE v.`key` = p_key AND v.expires_at > n AND v.seq < w.seq) " +
		"AND NOT EXISTS (SELECT 1 FROM {h} WHERE `key` = p_key AND expires_at > n AND ({admits} >> mode) & 1 = 0)"
	// myLimitedWaits: a live Limited waiter, whom the slot a Limited
	// release freed may admit (driver.Limiter counts only the Limited
	// waiters before it): the release's answer 3.
	myLimitedWaits = "SELECT 1 FROM {q} WHERE `key` = p_key AND mode = 4 AND expires_at > n"
	myProcHead     = "BEGIN\n" +
		"	DECLARE n, e BIGINT;\n" +
		"	DECLARE f BIGINT UNSIGNED;\n" +
		"	DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;\n" +
		"	SET TRANSACTION ISOLATION LEVEL READ COMMITTED;\n" +
		"	START TRANSACTION;\n"
	myProcStart = myProcHead + "	" + myLockRow + "	SET n = {now};\n"
	myGrantProc = "CREATE PROCEDURE `{tn}_grant_v3`(p_key VARBINARY(512), p_owner VARBINARY(512), p_id VARBINARY(255), " +
		"p_mode TINYINT, p_compat INT, p_ttl BIGINT, p_token VARBINARY(255))\n" + myProcStart +
		"	IF EXISTS (SELECT 1 FROM {t} WHERE `key` = p_key AND owner <> '' AND expires_at > n)\n" +
		"		OR EXISTS (SELECT 1 FROM {h} WHERE `key` = p_key AND (owner = p_owner OR expires_at <= n OR (p_compat >> mode) & 1 = 0))\n" +
		"		OR EXISTS (SELECT 1 FROM {q} w WHERE w.`key` = p_key AND (w.expires_at <= n OR (w.token <> p_token AND (p_compat >> w.mode) & 1 = 0\n" +
		"			AND w.seq < COALESCE((SELECT seq FROM {q} WHERE `key` = p_key AND token = p_token), 18446744073709551615)))) THEN\n" +
		"		ROLLBACK;\n" +
		"		SELECT NULL;\n" +
		"	ELSE\n" +
		"		UPDATE `{tn}_fence` SET v = LAST_INSERT_ID(v + 1) WHERE id = 1;\n" +
		"		SET f = LAST_INSERT_ID(), e = n + p_ttl;\n" +
		"		INSERT INTO {h} (`key`, owner, mode, fence, holds, ids, expires_at) VALUES (p_key, p_owner, p_mode, f, 1, CONCAT(' ', p_id, ' '), e);\n" +
		"		UPDATE {t} SET owner = '', fence = f, holds = 1, ids = ' ', expires_at = GREATEST(expires_at, e) WHERE `key` = p_key;\n" +
		"		DELETE FROM {q} WHERE `key` = p_key AND token = p_token;\n" +
		"		COMMIT;\n" +
		"		SELECT f;\n" +
		"	END IF;\n" +
		"END"
	// myGrantLimitedProc is Postgres's grantlim (postgres_modes.go) here:
	// a Limited request granted (its fence), refused keeping its place
	// (minus the ms to wait, and the place's seq), or declined (NULL).
	myGrantLimitedProc = "CREATE PROCEDURE `{tn}_grantlim_v1`(p_key VARBINARY(512), p_owner VARBINARY(512), p_id VARBINARY(255), " +
		"p_ttl BIGINT, p_n INT, p_token VARBINARY(255))\n" +
		"BEGIN\n" +
		"	DECLARE n, e, w, qw BIGINT;\n" +
		"	DECLARE f, mine BIGINT UNSIGNED;\n" +
		"	DECLARE taken, ahead, bad INT;\n" +
		"	DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;\n" +
		"	SET TRANSACTION ISOLATION LEVEL READ COMMITTED;\n" +
		"	START TRANSACTION;\n" +
		"	" + myLockRow + "	SET n = {now};\n" +
		"	SELECT COUNT(*), COALESCE(SUM(owner = p_owner OR expires_at <= n OR mode <> 4 OR lim <> p_n), 0), MIN(expires_at) - n\n" +
		"		INTO taken, bad, w FROM {h} WHERE `key` = p_key;\n" +
		"	SET mine = (SELECT seq FROM {q} WHERE `key` = p_key AND token = p_token AND p_token <> '');\n" +
		"	SELECT bad + COALESCE(SUM(expires_at <= n), 0), COALESCE(SUM(mode = 4 AND seq < COALESCE(mine, 18446744073709551615)), 0),\n" +
		"		MIN(CASE WHEN mode = 4 AND seq < COALESCE(mine, 18446744073709551615) THEN expires_at END) - n\n" +
		"		INTO bad, ahead, qw FROM {q} WHERE `key` = p_key AND token <> p_token;\n" +
		"	IF bad > 0 OR EXISTS (SELECT 1 FROM {t} WHERE `key` = p_key AND owner <> '' AND expires_at > n) THEN\n" +
		"		ROLLBACK;\n" +
		"		SELECT NULL, 0;\n" +
		"	ELSEIF taken + ahead >= p_n THEN\n" +
		"		IF p_token <> '' AND mine IS NULL THEN\n" +
		"			INSERT INTO {q} (`key`, token, mode, expires_at, lim) VALUES (p_key, p_token, 4, n + p_ttl, p_n);\n" +
		"			SET mine = LAST_INSERT_ID();\n" +
		"		ELSEIF p_token <> '' THEN\n" +
		"			UPDATE {q} SET mode = 4, lim = p_n, expires_at = n + p_ttl WHERE `key` = p_key AND token = p_token;\n" +
		"		END IF;\n" +
		"		COMMIT;\n" +
		"		SELECT -GREATEST(LEAST(COALESCE(w, qw), COALESCE(qw, w)), 1), COALESCE(mine, 0);\n" +
		"	ELSE\n" +
		"		UPDATE `{tn}_fence` SET v = LAST_INSERT_ID(v + 1) WHERE id = 1;\n" +
		"		SET f = LAST_INSERT_ID(), e = n + p_ttl;\n" +
		"		INSERT INTO {h} (`key`, owner, mode, fence, holds, ids, expires_at, lim) VALUES (p_key, p_owner, 4, f, 1, CONCAT(' ', p_id, ' '), e, p_n);\n" +
		"		UPDATE {t} SET owner = '', fence = f, holds = 1, ids = ' ', expires_at = GREATEST(expires_at, e) WHERE `key` = p_key;\n" +
		"		IF mine IS NOT NULL THEN\n" +
		"			DELETE FROM {q} WHERE `key` = p_key AND token = p_token;\n" +
		"		END IF;\n" +
		"		COMMIT;\n" +
		"		SELECT f, 0;\n" +
		"	END IF;\n" +
		"END"
	myReleaseProc = "CREATE PROCEDURE `{tn}_release_v4`(p_key VARBINARY(512), p_owner VARBINARY(512), p_mode TINYINT, " +
		"p_fence BIGINT UNSIGNED, p_id VARBINARY(255))\n" + myProcHead +
		// A release has a live modal header to lock, or nothing to do.
		"	SELECT MAX(expires_at) INTO e FROM {t} WHERE `key` = p_key AND owner = '' FOR UPDATE;\n" +
		"	SET n = {now};\n" +
		"	IF e IS NULL OR e <= n THEN\n" +
		"		SET e = 0;\n" +
		"	ELSE\n" +
		"		DELETE FROM {h} WHERE `key` = p_key AND owner = p_owner AND mode = p_mode AND fence = p_fence\n" +
		"			AND ids = CONCAT(' ', p_id, ' ') AND expires_at > n;\n" +
		"		SET e = ROW_COUNT();\n" +
		"	END IF;\n" +
		"	IF e = 0 THEN\n" +
		"		ROLLBACK;\n" +
		"		SELECT NULL;\n" +
		"	ELSE\n" +
		"		SELECT MAX(expires_at), MAX(fence) INTO e, f FROM {h} WHERE `key` = p_key AND expires_at > n;\n" +
		"		IF e IS NULL THEN\n" +
		"			DELETE FROM {t} WHERE `key` = p_key;\n" +
		"		ELSE\n" +
		"			UPDATE {t} SET fence = f, expires_at = e WHERE `key` = p_key;\n" +
		"		END IF;\n" +
		"		COMMIT;\n" +
		// The waiters' query only if holders are left, and in a SELECT of
		// its own: in an IF's condition it would be a locking read (outside
		// the transaction, at REPEATABLE READ), which can deadlock after
		// the COMMIT and fail a release that was done.
		"		IF e IS NULL THEN\n" +
		"			SELECT 2;\n" +
		"		ELSE\n" +
		"			SELECT CASE WHEN EXISTS (" + myFirstGoes + ") OR p_mode = 4 AND EXISTS (" + myLimitedWaits + ") THEN 3 ELSE 1 END;\n" +
		"		END IF;\n" +
		"	END IF;\n" +
		"END"
)

// myModeProcs makes the fast lane's procedures, the hand-off's and the
// claim's if missing, and turns each off where it cannot be made (no
// CREATE ROUTINE privilege) or, at its first call, where this user may not
// run it (myNoLane): the transaction, the plain release or the claim's
// statements are as correct, only slower.
func myModeProcs(ctx context.Context, d *sqlDriver, fill func(string) string) {
	for _, p := range []struct {
		name, proc string
		off        *atomic.Bool
	}{{"_grant_v3", myGrantProc, &d.laneOff}, {"_grantlim_v1", myGrantLimitedProc, &d.laneOff}, {"_release_v4", myReleaseProc, &d.laneOff},
		{myXReleaseName, myXReleaseProc, &d.handOffOff}, {myClaimName, myClaimProc, &d.claimOff}} {
		var n int
		err := d.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.ROUTINES "+
			"WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME = ?", d.cfg.table+p.name).Scan(&n)
		if err == nil && n == 0 {
			_, err = d.db.ExecContext(ctx, fill(p.proc))
		}
		var my *mysql.MySQLError
		if err != nil && !(errors.As(err, &my) && my.Number == 1304) { // 1304: made meanwhile by another
			p.off.Store(true)
		}
	}
}

// myNoLane: a procedure missing (1305), not this user's to run (1370), its
// definer gone (1449), or another of its name and not its signature (1318).
func myNoLane(err error) bool {
	var my *mysql.MySQLError
	return errors.As(err, &my) && (my.Number == 1305 || my.Number == 1370 || my.Number == 1449 || my.Number == 1318)
}
