package sql

// The Postgres fast lane of the modal path (modefast.go): two PL/pgSQL
// functions, made or replaced with the schema (under its lock, as two
// sessions replacing one function at once fail). Each statement in them
// sees what committed before it, so what they read after the key's lock is
// what the modal transaction would read. Versioned by name: a changed body
// is a new function, and a process of the older version keeps its own.
const (
	pgGrantFast   = `SELECT "{tn}_grant_v3"($1, $2, $3, $4, $5, $6, $7)`
	pgReleaseFast = `SELECT "{tn}_release_v3"($1, $2, $3, $4, $5)`
	pgModeFuncs   = `
CREATE OR REPLACE FUNCTION "{tn}_grant_v3"(k text, o text, id text, m integer, compat integer, ttl bigint, tok text)
RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
	f bigint;
	e timestamptz;
BEGIN
	PERFORM pg_advisory_xact_lock(hashtext('{tn}'), hashtext(k));
	IF EXISTS (SELECT 1 FROM {t} WHERE "key" = k AND owner <> '' AND expires_at > {now})
		OR EXISTS (SELECT 1 FROM {h} WHERE "key" = k AND (owner = o OR expires_at <= {now} OR (compat >> mode) & 1 = 0))
		OR EXISTS (SELECT 1 FROM {q} w WHERE w."key" = k AND (w.expires_at <= {now} OR (w.token <> tok AND (compat >> w.mode) & 1 = 0
			AND w.seq < coalesce((SELECT seq FROM {q} WHERE "key" = k AND token = tok), 9223372036854775807)))) THEN
		RETURN NULL;
	END IF;
	f := nextval('"{tn}_fence"');
	e := {now} + ttl{ms};
	INSERT INTO {h} ("key", owner, mode, fence, holds, ids, expires_at) VALUES (k, o, m, f, 1, ' ' || id || ' ', e);
	INSERT INTO {t} AS l ("key", owner, fence, holds, ids, expires_at) VALUES (k, '', f, 1, ' ', e)
		ON CONFLICT ("key") DO UPDATE SET owner = '', fence = f, holds = 1, ids = ' ', expires_at = GREATEST(l.expires_at, e);
	DELETE FROM {q} WHERE "key" = k AND token = tok;
	RETURN f;
END $fn$;
CREATE OR REPLACE FUNCTION "{tn}_release_v3"(k text, o text, m integer, f bigint, id text)
RETURNS integer LANGUAGE plpgsql AS $fn$
DECLARE
	e timestamptz;
	top bigint;
BEGIN
	PERFORM pg_advisory_xact_lock(hashtext('{tn}'), hashtext(k));
	IF NOT EXISTS (SELECT 1 FROM {t} WHERE "key" = k AND owner = '' AND expires_at > {now}) THEN
		RETURN NULL;
	END IF;
	DELETE FROM {h} WHERE "key" = k AND owner = o AND mode = m AND fence = f AND ids = ' ' || id || ' ' AND expires_at > {now};
	IF NOT FOUND THEN
		RETURN NULL;
	END IF;
	SELECT max(expires_at), max(fence) INTO e, top FROM {h} WHERE "key" = k AND expires_at > {now};
	IF e IS NULL THEN
		DELETE FROM {t} WHERE "key" = k;
	ELSE
		UPDATE {t} SET fence = top, expires_at = e WHERE "key" = k;
	END IF;
	-- wake the waiters that the holders left and the waiters before them admit
	PERFORM pg_notify('{tn}', w.token) FROM {q} w WHERE w."key" = k AND w.expires_at > {now}
		AND NOT EXISTS (SELECT 1 FROM {h} x WHERE x."key" = k AND x.expires_at > {now} AND ({admits:x} >> w.mode) & 1 = 0)
		AND NOT EXISTS (SELECT 1 FROM {q} x WHERE x."key" = k AND x.expires_at > {now} AND x.seq < w.seq AND ({admits:x} >> w.mode) & 1 = 0);
	RETURN CASE WHEN e IS NULL THEN 2 ELSE 1 END;
END $fn$;`

	// pgExclusiveFuncs are the Exclusive release and expiry (pgRelease,
	// pgExpire) behind the key's lock, in functions, whose statements
	// each see what committed before them. One statement reads the queue
	// as of its start: a Shared waiter whose transaction (under the lock)
	// placed it while the release's statement waited was not woken, and
	// waited for its fallback, seconds (a read-heavy mix: one run in two).
	pgExclusiveFuncs = `;
CREATE OR REPLACE FUNCTION "{tn}_xrelease_v1"(text, text, bigint, text)
RETURNS TABLE (r_deleted bigint, r_decremented bigint, r_notified bigint, r_exists boolean) LANGUAGE plpgsql AS $fn$
BEGIN
	PERFORM pg_advisory_xact_lock(hashtext('{tn}'), hashtext($1));
	RETURN QUERY ` + pgRelease + `;
END $fn$;
CREATE OR REPLACE FUNCTION "{tn}_xexpire_v1"(text, text, bigint)
RETURNS TABLE (r_deleted bigint, r_notified bigint) LANGUAGE plpgsql AS $fn$
BEGIN
	PERFORM pg_advisory_xact_lock(hashtext('{tn}'), hashtext($1));
	RETURN QUERY ` + pgExpire + `;
END $fn$;`
)
