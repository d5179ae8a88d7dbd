"""Demo data set loaded by ``nemo seed``: one module per area, rows as plain dictionaries.

Descriptive identifier columns hold realistic (invented) Vietnamese names, contacts and birth
dates, and evidence holds verbatim answers: tests use them to prove that none of it ever leaves
the context service.
"""

from __future__ import annotations

from nemo_ops.seed_data import (
    conversations,
    identifier_keys,
    knowledge,
    people,
    progress,
    toolplane,
)
from nemo_ops.seed_data.base import DEMO_NOW, TableData

__all__ = ["DEMO_NOW", "TABLES", "TableData"]

#: Every table of the data set, in an order that satisfies the foreign keys.
TABLES: tuple[TableData, ...] = (
    *people.TABLES,
    *knowledge.TABLES,
    *progress.TABLES,
    *conversations.TABLES,
    *toolplane.TABLES,
    *identifier_keys.TABLES,
)
