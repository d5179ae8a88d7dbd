"""The edge's OAuth 2.0 Protected Resource Metadata (RFC 9728): which resource this is, which
authorization server issues its tokens, which scopes its tools ask for. Served without a
credential, at the path RFC 9728 derives from the resource URL (``/.well-known/
oauth-protected-resource/mcp``) and at the root form clients try next; readable from any page,
since it is public."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from nemo_core.oauth.config import METADATA_PATH, OAuthConfig

RESOURCE_NAME = "Nemo tool plane"


def metadata(oauth: OAuthConfig) -> dict[str, object]:
    """The metadata document."""
    return {
        "resource": oauth.resource,
        "authorization_servers": [oauth.issuer],
        "scopes_supported": list(oauth.scopes),
        "bearer_methods_supported": ["header"],
        "resource_name": RESOURCE_NAME,
        "resource_signing_alg_values_supported": list(oauth.algorithms),
    }


def metadata_paths(oauth: OAuthConfig) -> list[str]:
    """Where the document is served."""
    return list(dict.fromkeys((oauth.metadata_path, METADATA_PATH)))


class ResourceMetadata:
    """The endpoint: GET (and HEAD) with the document, CORS open to every origin."""

    def __init__(self, oauth: OAuthConfig) -> None:
        self._document = metadata(oauth)

    async def respond(self, request: Request) -> Response:
        headers = {
            "Access-Control-Allow-Origin": "*",
            "Cache-Control": "public, max-age=3600",
        }
        if request.method == "OPTIONS":
            headers["Access-Control-Allow-Methods"] = "GET"
            return Response(status_code=204, headers=headers)
        return JSONResponse(self._document, headers=headers)
