-- Curriculum knowledge: nodes, the edges between them, and practice items.

-- Vietnamese search folding in plain SQL (no unaccent extension on the embedded server): NFC,
-- toned and hatted vowels to their base letter, đ to d, then lower case. Upper-case letters are
-- mapped directly because lower() only folds non-ASCII letters under a Unicode-aware ctype.
-- Mirrors the Python folding (NFD, drop combining marks, đ to d) for Vietnamese text.
CREATE FUNCTION knowledge.fold_vi(input text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN lower(translate(
    normalize(input, NFC),
    'áàảãạăắằẳẵặâấầẩẫậéèẻẽẹêếềểễệíìỉĩịóòỏõọôốồổỗộơớờởỡợúùủũụưứừửữựýỳỷỹỵđ'
    'ÁÀẢÃẠĂẮẰẲẴẶÂẤẦẨẪẬÉÈẺẼẸÊẾỀỂỄỆÍÌỈĨỊÓÒỎÕỌÔỐỒỔỖỘƠỚỜỞỠỢÚÙỦŨỤƯỨỪỬỮỰÝỲỶỸỴĐ',
    'aaaaaaaaaaaaaaaaaeeeeeeeeeeeiiiiiooooooooooooooooouuuuuuuuuuuyyyyyd'
    'aaaaaaaaaaaaaaaaaeeeeeeeeeeeiiiiiooooooooooooooooouuuuuuuuuuuyyyyyd'
));

-- Folded title and aliases in one string, for generated search columns. array_to_string is only
-- STABLE in general but immutable for text[], which is all this function accepts.
CREATE FUNCTION knowledge.search_text(title text, aliases text[]) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN knowledge.fold_vi(title || ' ' || coalesce(array_to_string(aliases, ' '), ''));

CREATE TABLE knowledge.nodes (
    id           text PRIMARY KEY,
    title        text NOT NULL,  -- Vietnamese
    title_folded text GENERATED ALWAYS AS (knowledge.fold_vi(title)) STORED,
    aliases      text[] NOT NULL DEFAULT '{}',  -- English names and synonyms
    search_text  text GENERATED ALWAYS AS (knowledge.search_text(title, aliases)) STORED,
    subject      text NOT NULL,
    grade        smallint NOT NULL CHECK (grade BETWEEN 1 AND 12),
    strand       text NOT NULL,
    description  text NOT NULL DEFAULT '',
    updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX nodes_subject_grade_idx ON knowledge.nodes (subject, grade);

CREATE TABLE knowledge.edges (
    from_node_id text NOT NULL REFERENCES knowledge.nodes (id) ON DELETE CASCADE,
    to_node_id   text NOT NULL REFERENCES knowledge.nodes (id) ON DELETE CASCADE,
    -- prerequisite: from must be learned before to.
    kind         text NOT NULL CHECK (kind IN ('prerequisite', 'related', 'part_of')),
    PRIMARY KEY (from_node_id, to_node_id, kind),
    CHECK (from_node_id <> to_node_id)
);
CREATE INDEX edges_to_node_idx ON knowledge.edges (to_node_id);

CREATE TABLE knowledge.items (
    id          text PRIMARY KEY,
    node_id     text NOT NULL REFERENCES knowledge.nodes (id) ON DELETE CASCADE,
    kind        text NOT NULL CHECK (kind IN ('multiple_choice', 'short_answer', 'open')),
    stem        text NOT NULL,
    answer_key  text NOT NULL,
    rubric      text NOT NULL DEFAULT '',
    difficulty  double precision NOT NULL CHECK (difficulty BETWEEN 0 AND 1),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX items_node_id_idx ON knowledge.items (node_id);

GRANT SELECT ON ALL TABLES IN SCHEMA knowledge TO nemo_context;
REVOKE ALL ON FUNCTION knowledge.fold_vi(text), knowledge.search_text(text, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION knowledge.fold_vi(text) TO nemo_context;
