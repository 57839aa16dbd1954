package sql

// The Postgres fast lane of the modal path (modefast.go): two PL/pgSQL
// functions, made or replaced with the schema (under its lock, as two
// sessions replacing one function at once fail). Each statement in them
// sees what committed before it, so what they read after the key's lock is
// what the modal transaction would read. Versioned by name: a changed body
// is a new function, and a process of the older version keeps its own.
const (
	pgGrantFast    = `SELECT "{tn}_grant_v6"($1, $2, $3, $4, $5, $6, $7)`
	pgGrantLimited = `SELECT r_fence, coalesce(r_seq, 0) FROM "{tn}_grantlim_v1"($1, $2, $3, $4, $5, $6)`
	pgReleaseFast  = `SELECT "{tn}_release_v9"($1, $2, $3, $4, $5)`
	pgModeFuncs    = `
CREATE OR REPLACE FUNCTION "{tn}_grant_v6"(k text, o text, id text, m integer, compat integer, ttl bigint, tok text)
RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
	f bigint;
	e timestamptz;
	decline boolean;
	wait bigint;
	qwait bigint;
	mine bigint;
	x text;
	xwait bigint;
	life interval := ttl{ms};
BEGIN
	IF m = 4 THEN -- Limited: the transaction's
		RETURN NULL;
	END IF;
	PERFORM pg_advisory_xact_lock(hashtext('{tn}'), hashtext(k));
	-- the transaction's: a re-entry or mismatch (Limited holders: any
	-- owner's), lapsed rows to collect
	SELECT owner, {left} INTO x, xwait FROM {t} WHERE "key" = k AND owner <> '' AND expires_at > {now};
	SELECT bool_or(owner = o OR expires_at <= {now} OR mode = 4), min({left}) FILTER (WHERE (compat >> mode) & 1 = 0)
		INTO decline, wait FROM {h} WHERE "key" = k;
	IF decline OR x = o THEN
		RETURN NULL;
	END IF;
	IF tok <> '' THEN
		SELECT seq INTO mine FROM {q} WHERE "key" = k AND token = tok;
	END IF;
	SELECT bool_or(expires_at <= {now}), min({left}) FILTER (WHERE token <> tok AND (compat >> mode) & 1 = 0
		AND seq < coalesce(mine, 9223372036854775807)) INTO decline, qwait FROM {q} WHERE "key" = k;
	IF decline THEN
		RETURN NULL;
	END IF;
	-- refused: the ms until the first that keeps it out may lapse; a
	-- queued call takes or keeps its place
	wait := least(wait, qwait, xwait);
	IF wait IS NOT NULL THEN
		IF tok = '' THEN
			NULL;
		ELSIF mine IS NULL THEN
			INSERT INTO {q} ("key", token, mode, expires_at, owner, ttl) VALUES (k, tok, m, {now} + ttl{ms}, o, ttl);
		ELSE
			UPDATE {q} w SET mode = m, expires_at = {now} + life WHERE w."key" = k AND w.token = tok;
		END IF;
		RETURN -greatest(wait, 1);
	END IF;
	f := nextval('"{tn}_fence"');
	e := {now} + ttl{ms};
	INSERT INTO {h} ("key", owner, mode, fence, holds, ids, expires_at) VALUES (k, o, m, f, 1, ' ' || id || ' ', e);
	INSERT INTO {t} AS l ("key", owner, fence, holds, ids, expires_at) VALUES (k, '', f, 1, ' ', e)
		ON CONFLICT ("key") DO UPDATE SET owner = '', fence = f, holds = 1, ids = ' ', expires_at = GREATEST(l.expires_at, e);
	IF mine IS NOT NULL THEN
		DELETE FROM {q} WHERE "key" = k AND token = tok;
	END IF;
	RETURN f;
END $fn$;
CREATE OR REPLACE FUNCTION "{tn}_release_v9"(k text, o text, m integer, f bigint, id text)
RETURNS integer LANGUAGE plpgsql AS $fn$
BEGIN
	PERFORM pg_advisory_xact_lock(hashtext('{tn}'), hashtext(k));
	IF NOT EXISTS (SELECT 1 FROM {t} WHERE "key" = k AND owner = '' AND expires_at > {now}) THEN
		RETURN NULL;
	END IF;
	DELETE FROM {h} WHERE "key" = k AND owner = o AND mode = m AND fence = f AND ids = ' ' || id || ' ' AND expires_at > {now};
	IF NOT FOUND THEN
		RETURN NULL;
	END IF;
	-- A reader leaving other readers: the modes held are as before, so no
	-- waiter is admitted; done, the lock held only this long (readers let
	-- go together queue on it). The header's expiry may stay the later
	-- one, which the next modal call sets right. Every change of holders
	-- takes the lock, so what this reads is exact.
	IF m = 1 AND EXISTS (SELECT 1 FROM {h} WHERE "key" = k AND mode = 1 AND expires_at > {now}) THEN
		RETURN 1;
	END IF;
	RETURN "{tn}_released_v5"(k); -- the rest: the header and the hand-off (the lock is re-entrant)
END $fn$;
-- A Limited request (limit.go) of Limit n: granted while fewer than n
-- live holders and Limited waiters before its place take the key's slots
-- (modeState.decideLimited), r_fence its fence; else refused, keeping its
-- place (r_seq), r_fence minus the ms until the first of them may lapse.
-- Declined (r_fence NULL): an Exclusive holder, a holder of another mode
-- or Limit (a mismatch), a re-entry, lapsed rows to collect.
CREATE OR REPLACE FUNCTION "{tn}_grantlim_v1"(k text, o text, id text, ttl bigint, n integer, tok text, OUT r_fence bigint, OUT r_seq bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
	e timestamptz;
	decline boolean;
	taken integer;
	wait bigint;
	ahead integer;
	qwait bigint;
BEGIN
	PERFORM pg_advisory_xact_lock(hashtext('{tn}'), hashtext(k));
	IF EXISTS (SELECT 1 FROM {t} WHERE "key" = k AND owner <> '' AND expires_at > {now}) THEN
		RETURN;
	END IF;
	SELECT bool_or(owner = o OR expires_at <= {now} OR mode <> 4 OR lim <> n), count(*), min({left})
		INTO decline, taken, wait FROM {h} WHERE "key" = k;
	IF decline THEN
		RETURN;
	END IF;
	IF tok <> '' THEN
		SELECT seq INTO r_seq FROM {q} WHERE "key" = k AND token = tok;
	END IF;
	SELECT bool_or(expires_at <= {now}), count(*) FILTER (WHERE mode = 4 AND seq < coalesce(r_seq, 9223372036854775807)),
		min({left}) FILTER (WHERE mode = 4 AND seq < coalesce(r_seq, 9223372036854775807))
		INTO decline, ahead, qwait FROM {q} WHERE "key" = k AND token <> tok;
	IF decline THEN
		RETURN;
	END IF;
	IF taken + ahead >= n THEN
		IF tok = '' THEN
			NULL;
		ELSIF r_seq IS NULL THEN
			INSERT INTO {q} ("key", token, mode, expires_at, owner, ttl, lim) VALUES (k, tok, 4, {now} + ttl{ms}, o, ttl, n)
				RETURNING seq INTO r_seq;
		ELSE
			UPDATE {q} w SET mode = 4, lim = n, expires_at = {now} + ttl{ms} WHERE w."key" = k AND w.token = tok;
		END IF;
		r_fence := -greatest(least(wait, qwait), 1);
		RETURN;
	END IF;
	r_fence := nextval('"{tn}_fence"');
	e := {now} + ttl{ms};
	INSERT INTO {h} ("key", owner, mode, fence, holds, ids, expires_at, lim) VALUES (k, o, 4, r_fence, 1, ' ' || id || ' ', e, n);
	INSERT INTO {t} AS l ("key", owner, fence, holds, ids, expires_at) VALUES (k, '', r_fence, 1, ' ', e)
		ON CONFLICT ("key") DO UPDATE SET owner = '', fence = r_fence, holds = 1, ids = ' ', expires_at = GREATEST(l.expires_at, e);
	IF r_seq IS NOT NULL THEN
		DELETE FROM {q} WHERE "key" = k AND token = tok;
	END IF;
END $fn$;
CREATE OR REPLACE FUNCTION "{tn}_released_v5"(k text)
RETURNS integer LANGUAGE plpgsql AS $fn$
DECLARE
	e timestamptz;
	top bigint;
BEGIN
	PERFORM pg_advisory_xact_lock(hashtext('{tn}'), hashtext(k));
	SELECT max(expires_at), max(fence) INTO e, top FROM {h} WHERE "key" = k AND expires_at > {now};
	IF e IS NULL THEN
		DELETE FROM {t} WHERE "key" = k AND owner = '';
	ELSE
		UPDATE {t} SET fence = top, expires_at = e WHERE "key" = k AND owner = '';
	END IF;
	PERFORM "{tn}_handoff_v5"(k);
	RETURN CASE WHEN e IS NULL THEN 2 ELSE 1 END;
END $fn$;`

	// pgExclusiveFuncs are the Exclusive release and expiry behind the
	// key's lock, in functions, whose statements each see what committed
	// before them. (One statement reads the queue as of its start: a Shared
	// waiter whose transaction, under the lock, placed it while the
	// release's statement waited was not woken, and waited seconds for its
	// fallback.) The release hands the key to an Exclusive waiter first in
	// the queue, on a key with no holders of other modes, itself: what
	// pgHandoffFunc would do for it, in three statements (the place's
	// DELETE, the row's INSERT, its NOTIFY) where that takes ten, each
	// costing a function about 15 µs here besides its work (pgbench, a
	// release with a waiter: 165–185 µs more than two plain DELETEs
	// through v7, 60–150 after); a release that nobody waits for runs no
	// more statements than before.
	pgExclusiveFuncs = `;
CREATE OR REPLACE FUNCTION "{tn}_xrelease_v9"(k text, o text, f bigint, id text)
RETURNS TABLE (r_deleted bigint, r_decremented bigint, r_granted text, r_exists boolean) LANGUAGE plpgsql AS $fn$
DECLARE
	dd bigint;
	uu bigint := 0;
	g text := '';
	wt text;
	wo text;
	wl bigint;
	nf bigint;
BEGIN
	PERFORM pg_advisory_xact_lock(hashtext('{tn}'), hashtext(k));
	DELETE FROM {t} WHERE "key" = k AND owner = o AND (f = 0 OR fence = f) AND ids = ' ' || id || ' ';
	GET DIAGNOSTICS dd = ROW_COUNT;
	IF dd = 0 THEN
		UPDATE {t} SET holds = holds - 1, ids = replace(ids, ' ' || id || ' ', ' ')
			WHERE "key" = k AND owner = o AND (f = 0 OR fence = f) AND strpos(ids, ' ' || id || ' ') > 0;
		GET DIAGNOSTICS uu = ROW_COUNT;
	-- Places are taken under the key's lock, which this holds: with
	-- none, the hand-off would grant and wake nobody.
	ELSIF EXISTS (SELECT 1 FROM {q} WHERE "key" = k) THEN
		-- The first live waiter, if Exclusive with an owner and a TTL to
		-- grant, no holder of another mode recorded.
		DELETE FROM {q} WHERE "key" = k AND token = (SELECT token FROM {q} WHERE "key" = k AND expires_at > {now} ORDER BY seq LIMIT 1)
			AND mode = 0 AND owner <> '' AND ttl > 0 AND NOT EXISTS (SELECT 1 FROM {h} WHERE "key" = k)
			RETURNING token, owner, ttl INTO wt, wo, wl;
		IF wt IS NOT NULL THEN
			INSERT INTO {t} ("key", owner, fence, holds, ids, expires_at)
				VALUES (k, wo, nextval('"{tn}_fence"'), 1, ' ' || wt || ' ', {now} + wl{ms}) RETURNING fence INTO nf;
			PERFORM pg_notify('{tn}', wt || ' ' || nf);
			g := wt || ' ' || nf || ',';
		ELSE
			g := "{tn}_handoff_v5"(k);
		END IF;
	END IF;
	RETURN QUERY SELECT dd, uu, g, false;
END $fn$;
CREATE OR REPLACE FUNCTION "{tn}_xexpire_v1"(text, text, bigint)
RETURNS TABLE (r_deleted bigint, r_notified bigint) LANGUAGE plpgsql AS $fn$
BEGIN
	PERFORM pg_advisory_xact_lock(hashtext('{tn}'), hashtext($1));
	RETURN QUERY ` + pgExpire + `;
END $fn$;` + pgHandoffFunc

	// pgHandoffFunc is the hand-off, run by a release under the key's
	// lock once it has let its hold go: the waiters at the head of the
	// queue that the holders left (and the waiters granted before them)
	// admit are granted the key here, each with its own TTL, and their
	// NOTIFY carries the fence ("token fence"): the waiter learns that it
	// holds the key without a statement of its own. A place the hand-off
	// cannot grant (an older version's, with no owner; an owner holding
	// the key already) is woken by its token alone, and looks itself.
	// Claiming the place by DELETE first means a waiter that left meanwhile
	// (Abandon) is not granted; one that leaves after finds its grant and
	// releases it by its ID. Each waiter is checked against a mask of the
	// modes held, kept as it grants, and the modal header is written once
	// after the run. Limited waiters (mode 4) are granted while no other
	// mode holds, up to the key's Limit (its Limited holders', else the
	// first such waiter's) counting the Limited holders; one of another
	// Limit, or that it cannot grant here, is woken by its token and looks
	// (limit.go); the other modes' waiters behind a Limited holder or
	// waiter are not admitted. It returns the grants as their notifications carry them,
	// "token fence", separated by commas, so that a release can hand them
	// to its own process's waiters at once (pgHandedHere).
	pgHandoffFunc = `
CREATE OR REPLACE FUNCTION "{tn}_handoff_v5"(k text)
RETURNS text LANGUAGE plpgsql AS $fn$
DECLARE
	granted text := '';
	w record;
	f bigint;
	e timestamptz;
	held integer;
	top bigint;
	last timestamptz;
	nl integer; -- Limited holders, and Limited waiters woken
	lims integer; -- the key's Limit
BEGIN
	IF EXISTS (SELECT 1 FROM {t} WHERE "key" = k AND owner <> '' AND expires_at > {now}) THEN
		RETURN granted;
	END IF;
	DELETE FROM {h} WHERE "key" = k AND expires_at <= {now};
	SELECT coalesce(bit_or(1 << mode), 0), count(*) FILTER (WHERE mode = 4), max(lim) FILTER (WHERE mode = 4)
		INTO held, nl, lims FROM {h} WHERE "key" = k;
	FOR w IN SELECT token, mode, owner, ttl, lim FROM {q} WHERE "key" = k AND expires_at > {now} ORDER BY seq LOOP
		IF w.mode = 4 THEN
			EXIT WHEN (held & ~16) <> 0; -- another mode holds: it would meet a mismatch
			lims := coalesce(lims, greatest(w.lim, 1));
			EXIT WHEN nl >= lims;
			nl := nl + 1;
			held := held | 16;
		ELSE
			CONTINUE WHEN (held & 16) <> 0; -- behind a Limited holder or waiter: not admitted
			-- w's mode admits every mode held, those granted here included
			-- (compatibility is symmetric; Exclusive, bit 0, admits none).
			EXIT WHEN ({admits:w} & held) <> held;
		END IF;
		IF w.owner = '' OR w.ttl <= 0 OR (w.mode = 4 AND w.lim <> lims) OR EXISTS (SELECT 1 FROM {h} WHERE "key" = k AND owner = w.owner) THEN
			PERFORM pg_notify('{tn}', w.token); -- it looks, and meets what keeps it out
			CONTINUE WHEN w.mode = 4; -- the Limited waiters behind it may go
			EXIT;
		END IF;
		DELETE FROM {q} WHERE "key" = k AND token = w.token;
		CONTINUE WHEN NOT FOUND;
		f := nextval('"{tn}_fence"');
		e := {now} + w.ttl{ms};
		IF w.mode = 0 THEN
			DELETE FROM {t} WHERE "key" = k;
			INSERT INTO {t} ("key", owner, fence, holds, ids, expires_at) VALUES (k, w.owner, f, 1, ' ' || w.token || ' ', e);
		ELSE
			INSERT INTO {h} ("key", owner, mode, fence, holds, ids, expires_at, lim) VALUES (k, w.owner, w.mode, f, 1, ' ' || w.token || ' ', e, w.lim);
			top := f;
			last := GREATEST(last, e);
		END IF;
		held := held | (1 << w.mode);
		PERFORM pg_notify('{tn}', w.token || ' ' || f);
		granted := granted || w.token || ' ' || f || ',';
	END LOOP;
	IF top IS NOT NULL THEN -- the modal header, once for every holder granted here
		INSERT INTO {t} AS l ("key", owner, fence, holds, ids, expires_at) VALUES (k, '', top, 1, ' ', last)
			ON CONFLICT ("key") DO UPDATE SET owner = '', fence = top, holds = 1, ids = ' ', expires_at = GREATEST(l.expires_at, last);
	END IF;
	RETURN granted;
END $fn$;`
)
