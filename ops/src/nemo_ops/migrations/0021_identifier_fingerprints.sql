-- The identifier gate must find what describes the child and the people around the child (names,
-- e-mail, phone, address, school, birth date) in any string, while nemo_context still cannot read
-- those columns. This definer function gives it keyed fingerprints of their normalised tokens,
-- never a value: the service fingerprints the tokens of a text with the same key and compares
-- (ADR 0014). pgcrypto is not available on the embedded server, so HMAC-SHA256 is written here
-- by its definition (RFC 2104) from the built-in sha256().

-- The keys the context service may fingerprint with, by their SHA-256 digest (the key itself is
-- a secret only the context service holds). The owner registers one (docs/operations/
-- identifier-key.md); nemo_context has no privilege here, so a holder of that role alone cannot
-- make the function fingerprint with a key of its own choosing and test guesses offline.
CREATE TABLE learning.identifier_keys (
    digest        bytea PRIMARY KEY CHECK (length(digest) = 32),
    registered_at timestamptz NOT NULL DEFAULT now()
);

-- The key XORed with the inner (0x36) or outer (0x5c) pad byte, as a 64-byte block.
CREATE FUNCTION learning.hmac_pad(p_key bytea, p_pad integer) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT decode(string_agg(lpad(to_hex(
        CASE WHEN i < length(k.block) THEN get_byte(k.block, i) ELSE 0 END # p_pad
    ), 2, '0'), '' ORDER BY i), 'hex')
    FROM (SELECT CASE WHEN length(p_key) > 64 THEN sha256(p_key) ELSE p_key END) AS k(block)
    CROSS JOIN generate_series(0, 63) AS i
$$;

CREATE FUNCTION learning.hmac_sha256(p_key bytea, p_message bytea) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT sha256(learning.hmac_pad(p_key, 92) || sha256(learning.hmac_pad(p_key, 54) || p_message))
$$;

-- A value as the gate reads it: compatibility forms and diacritics removed, đ as d, lower case
-- (mirrored by nemo_context.gate.tokens.fold_plain).
-- plpgsql, as the functions below: their statements' plans are cached per session, where a SQL
-- function with a FROM clause would be planned again on every call.
CREATE FUNCTION learning.identifier_tokens(p_value text) RETURNS text[]
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN array_remove(regexp_split_to_array(
        lower(regexp_replace(normalize(translate(p_value, 'đĐ', 'dD'), NFKD), '[\u0300-\u036f]', '', 'g')),
        '[^a-z0-9]+'
    ), '');
END
$$;

-- Whether p_key is registered; raises otherwise, so a service with the wrong key fails loudly
-- instead of silently matching nothing.
CREATE FUNCTION learning.identifier_key_registered(p_key bytea) RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM learning.identifier_keys WHERE digest = sha256(p_key)) THEN
        RAISE EXCEPTION 'the identifier key is not registered'
            USING ERRCODE = 'invalid_authorization_specification';
    END IF;
    RETURN true;
END
$$;

-- The same words with their Vietnamese diacritics, in lower case (mirrored by
-- nemo_context.gate.tokens.accented_words): "Hùng" and "Hưng" fold to the same word, and a text
-- written with diacritics is compared with them. A value whose words do not line up with its
-- folded words (letters outside Vietnamese) gives its folded words instead.
CREATE FUNCTION learning.identifier_accented_tokens(p_value text) RETURNS text[]
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    folded text[] := learning.identifier_tokens(p_value);
    accented text[] := array_remove(regexp_split_to_array(
        lower(translate(normalize(p_value, NFKC),
            'ÀÁẢÃẠĂẰẮẲẴẶÂẦẤẨẪẬÈÉẺẼẸÊỀẾỂỄỆÌÍỈĨỊÒÓỎÕỌÔỒỐỔỖỘƠỜỚỞỠỢÙÚỦŨỤƯỪỨỬỮỰỲÝỶỸỴĐ',
            'àáảãạăằắẳẵặâầấẩẫậèéẻẽẹêềếểễệìíỉĩịòóỏõọôồốổỗộơờớởỡợùúủũụưừứửữựỳýỷỹỵđ')),
        '[^a-z0-9àáảãạăằắẳẵặâầấẩẫậèéẻẽẹêềếểễệìíỉĩịòóỏõọôồốổỗộơờớởỡợùúủũụưừứửữựỳýỷỹỵđ]+'
    ), '');
BEGIN
    RETURN CASE WHEN cardinality(accented) = cardinality(folded) THEN accented ELSE folded END;
END
$$;

-- The circle of a learner bound to the caller's transaction: the learner and its siblings (their
-- learner rows), their own accounts, the family's members, the learner's guardians and every
-- mentor ever assigned to it. One row per identifier value:
--   name        the tokens of the name, in the order written (the last is read as the given name)
--   name_joined every ordered pair of the name's tokens and the whole name, written together
--   email       the tokens of the address's local part
--   phone       the national number's digits (without 0 or +84 in front)
--   address     the tokens of the first part of the address, from the house number on
--   school      the tokens of the school's name
--   birth_date  the date as YYYY-MM-DD
--   accented    the words of the names, addresses and schools with their diacritics
-- Each fingerprint is the first 16 bytes of HMAC-SHA256(p_key, token), in hex. Nothing answers
-- for a learner that is not bound, and no value leaves: only fingerprints and their kinds.
-- plpgsql rather than sql: its statement's plan is cached per session, where a SQL function
-- would plan this query on every build.
CREATE FUNCTION learning.circle_fingerprints(p_learner_id text, p_key bytea)
RETURNS TABLE (kind text, fingerprints text[])
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY
    -- Materialised: the pads are computed once, not for every value.
    WITH pads AS MATERIALIZED (
        SELECT learning.hmac_pad(p_key, 54) AS inner_pad, learning.hmac_pad(p_key, 92) AS outer_pad
    ),
    learner AS (
        SELECT l.id, l.family_id
        FROM learning.learners AS l
        WHERE l.id = p_learner_id
          AND l.id = ANY (string_to_array(current_setting('nemo.learner_ids', true), ','))
          AND learning.identifier_key_registered(p_key)
    ),
    kids AS (
        SELECT s.* FROM learning.learners AS s JOIN learner ON s.family_id = learner.family_id
    ),
    people AS (
        SELECT u.display_name, u.email, u.phone
        FROM learning.users AS u
        WHERE u.id IN (
            SELECT kids.user_id FROM kids
            UNION SELECT fm.user_id FROM learning.family_members AS fm JOIN learner USING (family_id)
            UNION SELECT g.user_id FROM learning.guardians AS g JOIN learner ON g.learner_id = learner.id
            UNION SELECT ma.mentor_user_id FROM learning.mentor_assignments AS ma
                JOIN learner ON ma.learner_id = learner.id
        )
    ),
    names AS (
        SELECT learning.identifier_tokens(coalesce(
            kids.display_name, concat_ws(' ', kids.last_name, kids.first_name)
        )) AS tokens
        FROM kids
        UNION ALL SELECT learning.identifier_tokens(people.display_name) FROM people
    ),
    values AS (
        SELECT 'name' AS kind, names.tokens FROM names
        UNION ALL
        SELECT 'name_joined', ARRAY(
            SELECT a.token || b.token
            FROM unnest(names.tokens) WITH ORDINALITY AS a(token, i)
            CROSS JOIN unnest(names.tokens) WITH ORDINALITY AS b(token, j)
            WHERE a.i <> b.j
            UNION SELECT array_to_string(names.tokens, '')
        )
        FROM names
        UNION ALL
        SELECT 'email', learning.identifier_tokens(split_part(e.email, '@', 1))
        FROM (SELECT email FROM kids UNION SELECT email FROM people) AS e
        UNION ALL
        SELECT 'phone', ARRAY[regexp_replace(regexp_replace(p.phone, '\D', '', 'g'), '^(84|0)', '')]
        FROM (SELECT phone FROM kids UNION SELECT phone FROM people) AS p
        UNION ALL
        SELECT 'address', learning.identifier_tokens(
            coalesce(substring(split_part(kids.address, ',', 1) FROM '[0-9].*$'),
                     split_part(kids.address, ',', 1))
        )
        FROM kids
        UNION ALL
        SELECT 'school', learning.identifier_tokens(kids.school_name) FROM kids
        UNION ALL
        SELECT 'birth_date', ARRAY[to_char(kids.birth_date, 'YYYY-MM-DD')] FROM kids
        UNION ALL
        SELECT 'accented', learning.identifier_accented_tokens(w.value)
        FROM (
            SELECT coalesce(kids.display_name, concat_ws(' ', kids.last_name, kids.first_name))
            FROM kids
            UNION ALL SELECT people.display_name FROM people
            UNION ALL SELECT split_part(kids.address, ',', 1) FROM kids
            UNION ALL SELECT kids.school_name FROM kids
        ) AS w(value)
    ),
    -- Every word of every value fingerprinted in one pass, then gathered back per value.
    numbered AS (
        SELECT row_number() OVER () AS id, v.kind, v.tokens
        FROM values AS v
        WHERE v.tokens IS NOT NULL AND cardinality(v.tokens) > 0 AND v.tokens[1] <> ''
    )
    SELECT n.kind, array_agg(encode(substr(sha256(
        pads.outer_pad || sha256(pads.inner_pad || convert_to(t.token, 'UTF8'))
    ), 1, 16), 'hex') ORDER BY t.position)
    FROM numbered AS n
    CROSS JOIN LATERAL unnest(n.tokens) WITH ORDINALITY AS t(token, position)
    CROSS JOIN pads
    GROUP BY n.id, n.kind;
END
$$;

REVOKE ALL ON FUNCTION
    learning.hmac_pad(bytea, integer),
    learning.hmac_sha256(bytea, bytea),
    learning.identifier_tokens(text),
    learning.identifier_accented_tokens(text),
    learning.identifier_key_registered(bytea),
    learning.circle_fingerprints(text, bytea)
FROM PUBLIC;
GRANT EXECUTE ON FUNCTION learning.circle_fingerprints(text, bytea) TO nemo_context;
