"""The local authorization server in `nemo dev up`: who may sign in (the seeded users) and what
dev.env says about it. The server itself, its process and its client are
:mod:`nemo_devtools.oauth_server` and :mod:`nemo_devtools.oauth_client`."""

from __future__ import annotations

from nemo_devtools import node
from nemo_devtools.oauth_server import DEFAULT_PORT as DEFAULT_PORT
from nemo_devtools.oauth_server import DEV_CLIENT_ID as DEV_CLIENT_ID
from nemo_devtools.oauth_server import PROJECT_DIR, Account, AuthorizationServerUnavailable
from nemo_ops.seed_data.people import USERS

#: The dev.env variables naming the issuer and the learning agent's development client.
ISSUER_VARIABLE = "NEMO_OAUTH_ISSUER"
CLIENT_ID_VARIABLE = "NEMO_DEV_OAUTH_CLIENT_ID"


def seeded_accounts() -> list[Account]:
    """Every seeded user, by platform user id (the tokens' ``sub``) and role."""
    return [Account(str(row["id"]), str(row["role"])) for row in USERS.rows]


def install() -> None:
    """Install the server's pinned packages now (once per lockfile), so that a missing npm is
    reported before anything starts."""
    try:
        node.install(PROJECT_DIR)
    except node.NodeToolsUnavailable as error:
        raise AuthorizationServerUnavailable(
            f"`nemo dev up` runs a local authorization server on Node: {error}"
        ) from error
