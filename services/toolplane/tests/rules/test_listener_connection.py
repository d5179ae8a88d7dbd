"""Where the access change listener connects: LISTEN needs a session of its own, so with the
database URL through a transaction pooler the listener takes the direct URL, and a tool plane
configured with the one and without the other refuses to start. (Through the pooler, end to
end: ``tests/pooled/test_stack.py``.)"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from nemo_toolplane.settings import ToolPlaneSettings

POOLED = "postgresql://nemo_toolplane:pw@pooler:6432/nemo"
DIRECT = "postgresql://nemo_toolplane:pw@postgres:5432/nemo"


def test_transaction_pooling_without_a_direct_url_is_refused_at_start() -> None:
    with pytest.raises(ValidationError, match="database_direct_url is required"):
        ToolPlaneSettings(database_url=POOLED, database_transaction_pooling=True)


@pytest.mark.parametrize("pooling", [True, False])
def test_the_listener_takes_the_direct_url_when_there_is_one(pooling: bool) -> None:
    settings = ToolPlaneSettings(
        database_url=POOLED, database_direct_url=DIRECT, database_transaction_pooling=pooling
    )
    assert settings.listener_database_url() == DIRECT


def test_without_a_direct_url_the_listener_shares_the_database_url() -> None:
    settings = ToolPlaneSettings(database_url=DIRECT)
    assert settings.listener_database_url() == DIRECT
