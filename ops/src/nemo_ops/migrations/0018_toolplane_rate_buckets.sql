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
    -- When the bucket is full again if nothing more is taken.
    full_at timestamptz NOT NULL
);

CREATE INDEX rate_buckets_full_at ON toolplane.rate_buckets (full_at);

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
BEGIN
    IF cardinality(rates) <> wanted OR cardinality(bursts) <> wanted THEN
        RAISE EXCEPTION 'take_tokens: keys, rates and bursts differ in length';
    END IF;
    IF EXISTS (SELECT FROM unnest(rates, bursts) AS u(rate, burst)
               WHERE NOT (rate > 0 AND burst >= 1)) THEN
        RAISE EXCEPTION 'take_tokens: every rate must be positive and every burst at least 1';
    END IF;
    wait := 0;
    IF wanted = 0 THEN
        RETURN;
    END IF;
    FOR attempt IN 1..2 LOOP
        SELECT count(*),
               coalesce(max(CASE WHEN level < 1 THEN (1 - level) / rate END), 0),
               (array_agg(key ORDER BY CASE WHEN level < 1 THEN (1 - level) / rate END
                                       DESC NULLS LAST))[1]
        INTO found, wait, refused
        FROM (
            SELECT b.key, u.rate,
                   least(u.burst, b.tokens + extract(epoch FROM moment - b.updated) * u.rate)
                       AS level
            FROM toolplane.rate_buckets b
            JOIN unnest(keys, rates, bursts) AS u(key, rate, burst) ON u.key = b.key
            ORDER BY b.key
            FOR UPDATE OF b
        ) locked;
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
    -- Every expression reads the row as it was: the level before this charge.
    UPDATE toolplane.rate_buckets b
    SET tokens = least(u.burst, b.tokens + extract(epoch FROM moment - b.updated) * u.rate) - 1,
        updated = moment,
        full_at = moment + make_interval(secs => (u.burst + 1 - least(u.burst,
            b.tokens + extract(epoch FROM moment - b.updated) * u.rate)) / u.rate)
    FROM unnest(keys, rates, bursts) AS u(key, rate, burst)
    WHERE b.key = u.key;
END
$$;

REVOKE ALL ON FUNCTION toolplane.take_tokens(text[], double precision[], double precision[])
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION toolplane.take_tokens(text[], double precision[], double precision[])
    TO nemo_toolplane;
GRANT SELECT, INSERT, UPDATE, DELETE ON toolplane.rate_buckets TO nemo_toolplane;
