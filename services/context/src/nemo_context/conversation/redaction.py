"""Chat text is made safe for the identifier gate before the gate sees the bundle.

Chat messages and summaries are free text: a learner may type their own account id, a parent may
paste one, a tutor reply may teach the English words "name" and "address" as ``"name": tên``, a
lesson on JSON may quote ``{"email": "..."}``. Such text is stored as written. If the gate simply
blocked it, every later turn of that session would fail for good, since the message stays in the
history. So the conversation builder redacts free text first (:func:`redact_chat_text`), with the
gate's own rules:

- the forbidden values (the learner's id, family id and the ids of linked users) become
  :data:`MASK`, matched as the gate matches them (case-insensitive, on token boundaries);
- a forbidden name in a key position (``"email":``, even in JSON cut short) becomes
  :data:`FIELD_MASK`;
- text the gate would still refuse after that (an id hidden behind a JSON escape, brackets
  nested too deep to read) is replaced whole by :data:`OMITTED`.

The gate still runs on the whole bundle afterwards. Everything that is not free text (state,
profile, knowledge, ids of the bundle) is not redacted: a key there is a bug and is blocked.

Names written in chat are passed through. The context service cannot know them (its database role
has no privilege on name columns, by design), and a learner telling a tutor their name is part of
the conversation the learner chose to have; the gate's guarantee is about what the platform adds,
not about what the learner writes.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Final

from nemo_context.gate import (
    JSON_KEY,
    find_leak,
    is_forbidden_field_name,
    json_key_name,
    value_pattern,
)

MASK: Final = "[id]"
FIELD_MASK: Final = "[field]"
OMITTED: Final = "[omitted]"


def mask_keys(text: str, forbidden_values: Collection[str]) -> str:
    """``text`` with every forbidden value replaced by :data:`MASK`."""
    pattern = value_pattern(tuple(sorted(forbidden_values)))
    return text if pattern is None else pattern.sub(MASK, text)


def redact_chat_text(text: str, forbidden_values: Collection[str]) -> str:
    """``text`` as the conversation bundle may carry it; see the module docstring."""
    masked = mask_keys(text, forbidden_values)
    if '"' not in masked:  # no JSON key or string without one: nothing more the gate reads
        return masked
    masked = JSON_KEY.sub(_mask_forbidden_name, masked)
    if find_leak(masked, forbidden_values=forbidden_values) is not None:
        return OMITTED
    return masked


def _mask_forbidden_name(match: re.Match[str]) -> str:
    if not is_forbidden_field_name(json_key_name(match)):
        return match.group(0)
    return f'"{FIELD_MASK}"{match.group("colon")}'
