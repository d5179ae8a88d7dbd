-- The learners a person is linked to, for their own view of what AI did with them (issue 26):
-- the learner themself, a family member, a registered guardian, a mentor with an active
-- assignment. Definer rights because learners, guardians and mentor assignments are bound to one
-- learner per transaction and the person's learners are not known before this; it returns keys
-- and the relation only, for one user.
CREATE FUNCTION learning.linked_learners(p_user_id text)
RETURNS TABLE (learner_id text, relation text)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT l.id, 'self' FROM learning.learners AS l WHERE l.user_id = p_user_id
    UNION ALL
    SELECT l.id, 'family_member'
    FROM learning.family_members AS m
    JOIN learning.learners AS l ON l.family_id = m.family_id
    WHERE m.user_id = p_user_id AND m.relation IN ('owner', 'guardian', 'supporter')
    UNION ALL
    SELECT g.learner_id, 'guardian' FROM learning.guardians AS g WHERE g.user_id = p_user_id
    UNION ALL
    SELECT a.learner_id, 'mentor'
    FROM learning.mentor_assignments AS a
    WHERE a.mentor_user_id = p_user_id AND a.status = 'active'
$$;

-- Every learner's key, for staff and administrators only (they reach every learner): what a
-- learner pseudonym is resolved among when staff search the audit log by it. Keys only.
CREATE FUNCTION learning.learner_keys_for_staff(p_user_id text)
RETURNS SETOF text
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT l.id FROM learning.learners AS l
    WHERE EXISTS (
        SELECT FROM learning.users AS u WHERE u.id = p_user_id AND u.role IN ('admin', 'staff')
    )
$$;

REVOKE ALL ON FUNCTION
    learning.linked_learners(text),
    learning.learner_keys_for_staff(text)
FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    learning.linked_learners(text),
    learning.learner_keys_for_staff(text)
TO nemo_context;
