"""Assembles the console: its routes under the path it is published at, the security headers,
the channels to the services and the sign-in client; runs it with uvicorn."""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from nemo_console import auth_pages, guardian_pages, operator_pages
from nemo_console.backends import Backends
from nemo_console.security import SecurityHeaders
from nemo_console.sessions import Cookies, Sealer
from nemo_console.settings import ConsoleSettings
from nemo_console.signin import OpenIdProvider
from nemo_console.web import Console, render, templates

logger = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"


def routes() -> list[BaseRoute]:
    """The console's pages; paths relative to where it is published."""
    return [
        Route("/", auth_pages.home, name="home"),
        Route("/signin", auth_pages.sign_in, name="sign_in"),
        Route("/auth/callback", auth_pages.callback, name="callback"),
        Route("/signout", auth_pages.sign_out, methods=["POST"], name="sign_out"),
        Route("/lang/{locale}", auth_pages.language, name="language"),
        Route("/approvals", operator_pages.approvals, name="approvals"),
        Route("/approvals/{approval_id}", operator_pages.approval, name="approval"),
        Route(
            "/approvals/{approval_id}/decide",
            operator_pages.decide,
            methods=["POST"],
            name="decide",
        ),
        Route("/audit", operator_pages.audit, name="audit"),
        Route("/audit.csv", operator_pages.audit_csv, name="audit_csv"),
        Route("/agents", operator_pages.agents, name="agents"),
        Route("/agents/tokens", operator_pages.issue_token, methods=["POST"], name="issue_token"),
        Route(
            "/agents/tokens/{token_id}/revoke",
            operator_pages.revoke_token,
            methods=["POST"],
            name="revoke_token",
        ),
        Route("/agents/grants", operator_pages.create_grant, methods=["POST"], name="create_grant"),
        Route(
            "/agents/grants/{grant_id:int}/delete",
            operator_pages.delete_grant,
            methods=["POST"],
            name="delete_grant",
        ),
        Route("/policies", operator_pages.policies, name="policies"),
        Route("/evaluation", operator_pages.evaluation, name="evaluation"),
        Route("/evaluation/chart.png", operator_pages.evaluation_chart, name="evaluation_chart"),
        Route("/family", guardian_pages.family, name="family"),
        Route("/family/revoke", guardian_pages.revoke, methods=["POST"], name="revoke"),
        Route("/family/{learner_ref}", guardian_pages.child, name="child"),
        Route("/family/{learner_ref}/rights", guardian_pages.ask, methods=["POST"], name="ask"),
        Route("/snapshot", guardian_pages.snapshot, name="snapshot"),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]


async def _health(request: Request) -> Response:
    return PlainTextResponse("ok")


async def _not_found(request: Request, exc: Exception) -> Response:
    return render(
        request, "error.html", {"title_key": "error_title", "message": "not found"}, status=404
    )


def create_app(settings: ConsoleSettings) -> Starlette:
    """The console as an ASGI application; its pages under ``settings.root_path``."""
    keys = settings.session_key_list()
    if not keys:
        logger.warning(
            "no session key configured: using a random key for this process, so sessions end "
            "when it restarts (set NEMO_CONSOLE_SESSION_KEYS_FILE)"
        )
        keys = [secrets.token_urlsafe(32)]
    root = settings.root_path
    cookies = Cookies(
        Sealer(Sealer.derive(keys)),
        path=root or "/",
        secure=settings.secure_cookies,
        session_seconds=settings.session_seconds,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # Channels and clients belong to the loop that serves, made once it runs.
        http = httpx.AsyncClient(timeout=10.0, follow_redirects=False)
        backends = Backends(settings)
        app.state.console = Console(
            settings=settings,
            backends=backends,
            cookies=cookies,
            provider=OpenIdProvider(settings, http),
            templates=templates(),
        )
        try:
            yield
        finally:
            await backends.close()
            await http.aclose()

    pages = routes()
    app = Starlette(
        routes=[
            # Probes at the root, whatever the path the pages are published at.
            Route("/healthz", _health, name="healthz"),
            *([Mount(root, routes=pages)] if root else pages),
        ],
        exception_handlers={404: _not_found},
        lifespan=lifespan,
    )
    app.add_middleware(SecurityHeaders, static_prefix=f"{root}/static/")
    return app
