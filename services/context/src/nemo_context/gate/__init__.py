"""The identifier gate: the last check on every finished bundle before it leaves the service.

Columns that describe a person are never selected (the database role cannot), but a query can
still grow a column or a builder can copy a key into free text. The gate reads every finished
message and refuses it when it finds a forbidden field name or a forbidden value:

- :mod:`.walk` gathers what a message holds and judges it;
- :mod:`.gated` holds the result (:class:`Gated`, built only by :func:`gate`) and records blocks;
- :mod:`.names` and :mod:`.rules` judge field names by their words; :mod:`.text` folds spellings,
  decodes encodings and finds keys written in text.
"""

from nemo_context.gate.gated import Gated, gate, leak_blocked, record_block
from nemo_context.gate.names import is_forbidden_name
from nemo_context.gate.walk import (
    LeakFinding,
    find_forbidden_name,
    find_leak,
    forbidden_names_in,
    text_finding,
)

__all__ = [
    "Gated",
    "LeakFinding",
    "find_forbidden_name",
    "find_leak",
    "forbidden_names_in",
    "gate",
    "is_forbidden_name",
    "leak_blocked",
    "record_block",
    "text_finding",
]
