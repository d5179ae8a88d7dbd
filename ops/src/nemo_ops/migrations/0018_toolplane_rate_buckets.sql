-- Token buckets shared by every tool plane replica: call limits per agent, user and tool, the
-- failed-authentication limit per client address, and the approval requests of an agent for a
-- user. One bucket a row; a bucket that has refilled completely is the same as no row, so rows
-- past their full_at are deleted at any time.
--
-- UNLOGGED: no WAL per call, and the table is not copied to standbys. A crash or a failover
-- empties it, which hands every source one fresh burst: a limiter's state is worth less than
-- the write-ahead log it would cost on every call.
CREATE UNLOGGED TABLE toolplane.rate_buckets (
    key     text PRIMARY KEY,
    tokens  double precision NOT NULL,
    -- The database's clock, the one every replica shares, at the last charge.
    updated timestamptz NOT NULL,
    -- When the bucket is full again if nothing more is taken. Not indexed: every charge
    -- changes it, and an unindexed column keeps the update a heap-only one; the purge reads the
    -- table (as many rows as recently active sources) once a minute.
    full_at timestamptz NOT NULL
);

-- Take one token from each named bucket, or from none: a call refused by one limit spends
-- nothing of the others, so a source refused by its own limit cannot drain a limit it shares
-- (a user flooding an agent's bucket for the agent's other users). Buckets missing a row start
-- full. Rows are locked in key order, so concurrent calls sharing buckets cannot deadlock.
-- wait is 0 when the tokens were taken; otherwise the seconds until every bucket has one again,
-- and refused the key of the bucket that needs longest.
CREATE FUNCTION toolplane.take_tokens(
    keys text[], rates double precision[], bursts double precision[],
    OUT wait double precision, OUT refused text
)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    moment timestamptz := clock_timestamp();
    wanted integer := cardinality(keys);
    found integer;
    locked text[];
    levels double precision[];
    fills double precision[];
BEGIN
    IF cardinality(rates) <> wanted OR cardinality(bursts) <> wanted THEN
        RAISE EXCEPTION 'take_tokens: keys, rates and bursts differ in length';
    END IF;
    IF NOT (0 < ALL (rates) AND 1 <= ALL (bursts)) THEN
        RAISE EXCEPTION 'take_tokens: every rate must be positive and every burst at least 1';
    END IF;
    wait := 0;
    IF wanted = 0 THEN
        RETURN;
    END IF;
    FOR attempt IN 1..2 LOOP
        -- Rows found by the primary key (= ANY), each with its rate and burst by its place in
        -- the arrays; level is what the bucket holds now, refilled since its last charge.
        SELECT count(*),
               coalesce(max(CASE WHEN level < 1 THEN (1 - level) / rate END), 0),
               (array_agg(key ORDER BY CASE WHEN level < 1 THEN (1 - level) / rate END
                                       DESC NULLS LAST))[1],
               array_agg(key), array_agg(level), array_agg((burst + 1 - level) / rate)
        INTO found, wait, refused, locked, levels, fills
        FROM (
            SELECT b.key, rates[i] AS rate, bursts[i] AS burst,
                   least(bursts[i], b.tokens + extract(epoch FROM moment - b.updated) * rates[i])
                       AS level
            FROM toolplane.rate_buckets b, array_position(keys, b.key) AS i
            WHERE b.key = ANY (keys)
            ORDER BY b.key
            FOR UPDATE OF b
        ) current;
        EXIT WHEN found = wanted;
        -- Some bucket has no row yet: create it full (a concurrent creator wins quietly).
        INSERT INTO toolplane.rate_buckets (key, tokens, updated, full_at)
        SELECT u.key, u.burst, moment, moment
        FROM unnest(keys, bursts) AS u(key, burst)
        ORDER BY u.key
        ON CONFLICT (key) DO NOTHING;
    END LOOP;
    IF found <> wanted THEN
        RAISE EXCEPTION 'take_tokens: a bucket could not be created';
    END IF;
    IF wait > 0 THEN
        RETURN;
    END IF;
    refused := NULL;
    UPDATE toolplane.rate_buckets b
    SET tokens = n.level - 1, updated = moment, full_at = moment + make_interval(secs => n.fill)
    FROM unnest(locked, levels, fills) AS n(key, level, fill)
    WHERE b.key = ANY (keys) AND b.key = n.key;
END
$$;

REVOKE ALL ON FUNCTION toolplane.take_tokens(text[], double precision[], double precision[])
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION toolplane.take_tokens(text[], double precision[], double precision[])
    TO nemo_toolplane;
GRANT SELECT, INSERT, UPDATE, DELETE ON toolplane.rate_buckets TO nemo_toolplane;
