"""The learner isolation tests, through PgBouncer in transaction mode: row-level security bound
per transaction shows only the bound learners, nothing bound shows nothing, a write must carry a
bound learner, and the bundle of one learner holds nothing of another, while the context role's
clients take turns on fewer server connections than they are.

The tests are those of the access model (``ops/tests/test_access.py``), of the repository and of
the builder (``services/context/tests``), collected here a second time under the pooled fixtures
of ``conftest.py``: one definition of each rule, run on both paths.
"""

from __future__ import annotations

from ops.tests import test_access as access
from services.context.tests import test_builder as builder_tests
from services.context.tests import test_repository as repository

# The fixtures these tests take from their own modules (the pooled ones are in conftest.py).
builder = builder_tests.builder
owner = access.owner

test_access_a_query_without_where_sees_only_the_bound_learner = (
    access.test_a_query_without_where_sees_only_the_bound_learner
)
test_access_mastery_without_where = access.test_mastery_without_where
test_access_binding_ends_with_the_transaction = access.test_binding_ends_with_the_transaction
test_access_writes_must_carry_a_bound_learner = access.test_writes_must_carry_a_bound_learner
test_access_age_is_whole_years_for_a_bound_learner_only = (
    access.test_age_is_whole_years_for_a_bound_learner_only
)
test_repository_a_query_without_where_sees_only_the_bound_learner = (
    repository.test_a_query_without_where_sees_only_the_bound_learner
)
test_repository_nothing_bound_sees_no_learner_rows = (
    repository.test_nothing_bound_sees_no_learner_rows
)
test_repository_each_statement_reads_only_its_learner_even_without_row_level_security = (
    repository.test_each_statement_reads_only_its_learner_even_without_row_level_security
)
test_builder_the_bundle_of_b_holds_nothing_of_a = (
    builder_tests.test_the_bundle_of_b_holds_nothing_of_a
)
