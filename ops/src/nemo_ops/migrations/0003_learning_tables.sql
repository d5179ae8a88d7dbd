-- Learner data. Privileges and row-level security are in 0004.
--
-- Ids are text keys ('U-P1', 'F-1', 'L-1') as the platform issues them. Columns marked
-- "identifier" describe a person; the context role has no column privilege on them.

-- People and relations ---------------------------------------------------------------------

CREATE TABLE learning.users (
    id           text PRIMARY KEY,
    role         text NOT NULL CHECK (role IN ('parent', 'mentor', 'staff', 'admin', 'learner')),
    display_name text,  -- identifier
    email        text,  -- identifier
    phone        text,  -- identifier
    created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE learning.families (
    id         text PRIMARY KEY,
    name       text NOT NULL,  -- identifier (usually a surname)
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE learning.family_members (
    family_id  text NOT NULL REFERENCES learning.families (id) ON DELETE CASCADE,
    user_id    text NOT NULL REFERENCES learning.users (id) ON DELETE CASCADE,
    relation   text NOT NULL CHECK (relation IN ('owner', 'guardian', 'supporter')),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (family_id, user_id)
);
CREATE INDEX family_members_user_id_idx ON learning.family_members (user_id);

CREATE TABLE learning.learners (
    id           text PRIMARY KEY,
    family_id    text NOT NULL REFERENCES learning.families (id),
    -- The learner's own account, when the child signs in.
    user_id      text UNIQUE REFERENCES learning.users (id),
    grade        smallint NOT NULL CHECK (grade BETWEEN 1 AND 12),
    display_name text,   -- identifier
    first_name   text,   -- identifier
    last_name    text,   -- identifier
    birth_date   date,   -- identifier; age is served by learning.learner_age_years()
    email        text,   -- identifier
    phone        text,   -- identifier
    address      text,   -- identifier
    school_name  text,   -- identifier
    avatar_url   text,   -- identifier
    facebook_url text,   -- identifier
    links_json   jsonb,  -- identifier (social and personal links)
    photo_url    text,   -- identifier
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX learners_family_id_idx ON learning.learners (family_id);

-- Guardians outside the family record (for example a legal guardian).
CREATE TABLE learning.guardians (
    learner_id text NOT NULL REFERENCES learning.learners (id) ON DELETE CASCADE,
    user_id    text NOT NULL REFERENCES learning.users (id) ON DELETE CASCADE,
    kind       text NOT NULL DEFAULT 'guardian',
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (learner_id, user_id)
);
CREATE INDEX guardians_user_id_idx ON learning.guardians (user_id);

CREATE TABLE learning.mentor_assignments (
    mentor_user_id text NOT NULL REFERENCES learning.users (id) ON DELETE CASCADE,
    learner_id     text NOT NULL REFERENCES learning.learners (id) ON DELETE CASCADE,
    status         text NOT NULL CHECK (status IN ('active', 'inactive')),
    assigned_at    timestamptz NOT NULL DEFAULT now(),
    ended_at       timestamptz,
    PRIMARY KEY (mentor_user_id, learner_id),
    CHECK (status = 'active' OR ended_at IS NOT NULL)
);
CREATE INDEX mentor_assignments_learner_id_idx ON learning.mentor_assignments (learner_id);

-- Measures, kept apart: mastery, confidence, coverage and evidence are never one score -----

CREATE TABLE learning.mastery (
    learner_id     text NOT NULL REFERENCES learning.learners (id) ON DELETE CASCADE,
    node_id        text NOT NULL REFERENCES knowledge.nodes (id),
    mastery        double precision NOT NULL CHECK (mastery BETWEEN 0 AND 1),
    confidence     double precision NOT NULL CHECK (confidence BETWEEN 0 AND 1),
    coverage       double precision CHECK (coverage BETWEEN 0 AND 1),  -- NULL = not measured
    evidence_count integer NOT NULL DEFAULT 0 CHECK (evidence_count >= 0),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (learner_id, node_id)
);

CREATE TABLE learning.evidence (
    id           text PRIMARY KEY DEFAULT gen_random_uuid()::text,
    learner_id   text NOT NULL REFERENCES learning.learners (id) ON DELETE CASCADE,
    node_id      text NOT NULL REFERENCES knowledge.nodes (id),
    item_id      text REFERENCES knowledge.items (id),
    correct      boolean NOT NULL,
    reliability  double precision NOT NULL CHECK (reliability BETWEEN 0 AND 1),
    -- Verbatim answer, stated confidence and reasoning of the child: never leaves the database.
    payload_json jsonb NOT NULL DEFAULT '{}',
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX evidence_learner_recent_idx ON learning.evidence (learner_id, created_at DESC);

CREATE TABLE learning.goals (
    id         text PRIMARY KEY,
    learner_id text NOT NULL REFERENCES learning.learners (id) ON DELETE CASCADE,
    title      text NOT NULL,
    target     text,
    due_on     date,
    status     text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'achieved', 'dropped')),
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX goals_learner_id_idx ON learning.goals (learner_id);

-- Spaced-repetition schedule per learner and knowledge node.
CREATE TABLE learning.retention (
    learner_id       text NOT NULL REFERENCES learning.learners (id) ON DELETE CASCADE,
    node_id          text NOT NULL REFERENCES knowledge.nodes (id),
    due_at           timestamptz NOT NULL,
    interval_days    integer NOT NULL CHECK (interval_days > 0),
    strength         double precision NOT NULL CHECK (strength BETWEEN 0 AND 1),
    last_reviewed_at timestamptz,
    PRIMARY KEY (learner_id, node_id)
);
CREATE INDEX retention_learner_due_idx ON learning.retention (learner_id, due_at);

-- Outputs of the platform's engines, versioned. The AI plane only reads them; it never
-- recomputes readiness, plans or recommendations.
CREATE TABLE learning.learner_model_versions (
    learner_id     text NOT NULL REFERENCES learning.learners (id) ON DELETE CASCADE,
    kind           text NOT NULL CHECK (kind IN (
        'context', 'readiness', 'current_plan', 'next_experience', 'competency', 'progress'
    )),
    version        integer NOT NULL CHECK (version > 0),
    model_json     jsonb NOT NULL,
    engine_version text NOT NULL,
    computed_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (learner_id, kind, version)
);

-- Conversations ----------------------------------------------------------------------------

CREATE TABLE learning.chat_sessions (
    id         text PRIMARY KEY DEFAULT gen_random_uuid()::text,
    learner_id text NOT NULL REFERENCES learning.learners (id) ON DELETE CASCADE,
    -- Who is chatting: the learner's own account or a parent.
    user_id    text REFERENCES learning.users (id),
    status     text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'closed')),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    -- Target of the composite keys below: a message can only carry its session's learner.
    UNIQUE (id, learner_id)
);
CREATE INDEX chat_sessions_learner_id_idx ON learning.chat_sessions (learner_id);

CREATE TABLE learning.chat_messages (
    id           text PRIMARY KEY DEFAULT gen_random_uuid()::text,
    session_id   text NOT NULL,
    learner_id   text NOT NULL,
    turn_id      text NOT NULL,
    seq          integer NOT NULL CHECK (seq > 0),
    role         text NOT NULL CHECK (role IN ('user', 'assistant', 'tool', 'system')),
    type         text NOT NULL CHECK (type IN ('text', 'tool_result', 'ui_event')),
    -- A streamed reply cut mid-way is stored as 'partial' and never reused as context.
    status       text NOT NULL CHECK (
        status IN ('pending', 'completed', 'failed', 'partial', 'cancelled')
    ),
    content      text NOT NULL DEFAULT '',
    -- Short form of a tool result, the only part of it that conversation context carries.
    tool_summary text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (session_id, learner_id)
        REFERENCES learning.chat_sessions (id, learner_id) ON DELETE CASCADE,
    UNIQUE (session_id, seq),
    CHECK (type <> 'tool_result' OR role = 'tool')
);
CREATE INDEX chat_messages_learner_id_idx ON learning.chat_messages (learner_id);
CREATE INDEX chat_messages_turn_idx ON learning.chat_messages (session_id, turn_id);

CREATE TABLE learning.conversation_state (
    session_id     text PRIMARY KEY,
    learner_id     text NOT NULL,
    extracted_info jsonb NOT NULL DEFAULT '{}',
    agent_state    jsonb NOT NULL DEFAULT '{}',
    updated_at     timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (session_id, learner_id)
        REFERENCES learning.chat_sessions (id, learner_id) ON DELETE CASCADE
);
CREATE INDEX conversation_state_learner_id_idx ON learning.conversation_state (learner_id);

CREATE TABLE learning.conversation_summaries (
    session_id         text NOT NULL,
    learner_id         text NOT NULL,
    version            integer NOT NULL CHECK (version > 0),
    summary            text NOT NULL,
    -- The summary covers every message with seq <= covers_through_seq, i.e. covered_turns turns;
    -- turns after that and outside the recent window make the summary stale.
    covers_through_seq integer NOT NULL CHECK (covers_through_seq > 0),
    covered_turns      integer NOT NULL CHECK (covered_turns > 0),
    created_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, version),
    FOREIGN KEY (session_id, learner_id)
        REFERENCES learning.chat_sessions (id, learner_id) ON DELETE CASCADE
);
CREATE INDEX conversation_summaries_learner_id_idx
    ON learning.conversation_summaries (learner_id);
