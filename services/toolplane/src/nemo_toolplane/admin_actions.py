"""The record of what people did through the people's API: one row per call of an
authenticated person, with its outcome (``toolplane.admin_actions``, append-only for the tool
plane's role). A row that cannot be written is logged in full instead: the action has happened."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping

from nemo_core.db import Pool
from nemo_toolplane.people import Person

logger = logging.getLogger(__name__)

_INSERT = """
INSERT INTO toolplane.admin_actions (person, operator_id, user_id, credential_kind,
    credential_id, caller, action, target, outcome, details)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::jsonb)
"""

#: Outcome of a call that succeeded; others record their error's reason.
OK = "ok"


async def record_action(
    pool: Pool,
    person: Person,
    *,
    caller: str,
    action: str,
    target: str,
    outcome: str,
    details: Mapping[str, str] | None = None,
) -> None:
    values = (
        person.name,
        person.operator.operator_id if person.operator else None,
        person.user_id,
        person.credential_kind.value,
        person.credential_id,
        caller,
        action,
        target,
        outcome,
        json.dumps(dict(details or {}), sort_keys=True),
    )
    try:
        await pool.execute(_INSERT, *values)
    except Exception:
        logger.exception(
            "admin action not recorded",
            extra={"person": person.name, "action": action, "target": target, "outcome": outcome},
        )
