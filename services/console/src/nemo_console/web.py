"""What every page shares: the signed-in person, the language, rendering, the CSRF check of
forms, the answer to a service's refusal, and the record of what each person did.

Every URL a page emits comes from the routes (``url``), so the console works under any path it
is published at. Every action a person takes through the console is written to its log as one
JSON line (``console action``: who, what, on what, the outcome), beside what the services
record themselves (the tool plane's ``admin_actions``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from nemo_console.backends import Backends, Refused
from nemo_console.i18n import LOCALE_COOKIE, LOCALES, choose, phrase
from nemo_console.security import same_origin
from nemo_console.sessions import Cookies, Session, same_token
from nemo_console.settings import ConsoleSettings
from nemo_console.signin import OpenIdProvider

logger = logging.getLogger("nemo_console.actions")

TEMPLATES = Path(__file__).parent / "templates"


@dataclass
class Console:
    """The console's parts, shared by the pages (``request.app.state.console``)."""

    settings: ConsoleSettings
    backends: Backends
    cookies: Cookies
    provider: OpenIdProvider
    templates: Environment


def templates() -> Environment:
    return Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(("html",)),
        enable_async=False,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def console_of(request: Request) -> Console:
    console: Console = request.app.state.console
    return console


def url(request: Request, name: str, **params: Any) -> str:
    """The path of a route, under the console's published path."""
    return str(request.app.url_path_for(name, **params))


def locale_of(request: Request, session: Session | None = None) -> str:
    return choose(request.cookies.get(LOCALE_COOKIE), request.headers.get("accept-language"))


def render(
    request: Request,
    template: str,
    context: dict[str, Any] | None = None,
    *,
    session: Session | None = None,
    status: int = 200,
) -> HTMLResponse:
    console = console_of(request)
    locale = locale_of(request, session)
    values = {
        "request": request,
        "session": session,
        "locale": locale,
        "locales": LOCALES,
        "t": lambda key: phrase(key, locale),
        "url": lambda name, **params: url(request, name, **params),
        "here": request.url.path,
        **(context or {}),
    }
    body = console.templates.get_template(template).render(values)
    return HTMLResponse(body, status_code=status, headers={"Content-Language": locale})


def sign_in_redirect(request: Request) -> RedirectResponse:
    target = url(request, "sign_in")
    return RedirectResponse(f"{target}?next={request.url.path}", status_code=303)


def signed_in(request: Request) -> Session | None:
    return console_of(request).cookies.session(request)


class FormRefused(Exception):
    """A state-changing request without its CSRF token, or from another site."""


async def checked_form(request: Request, session: Session) -> FormData:
    """The form of a POST that carries the session's CSRF token from a page of the console;
    :class:`FormRefused` otherwise."""
    settings = console_of(request).settings
    if not same_origin(request.headers.get("origin"), settings.public_url):
        raise FormRefused
    form = await request.form()
    token = form.get("csrf_token")
    if not same_token(token if isinstance(token, str) else None, session.csrf_token):
        raise FormRefused
    return form


def form_refused(request: Request, session: Session | None) -> HTMLResponse:
    log_action(request, session, "form", request.url.path, "CSRF_REFUSED")
    return render(
        request,
        "error.html",
        {"title_key": "refused_title", "message": phrase("csrf_refused", locale_of(request))},
        session=session,
        status=403,
    )


def refused_page(request: Request, session: Session | None, refused: Refused) -> Response:
    """A service's refusal as a page with its status; signing in again when the person's
    token is no longer accepted."""
    if refused.status == 401:
        response = sign_in_redirect(request)
        console_of(request).cookies.end(response)
        return response
    title = "refused_title" if refused.status == 403 else "error_title"
    return render(
        request,
        "error.html",
        {"title_key": title, "message": refused.message, "reason": refused.reason},
        session=session,
        status=refused.status,
    )


def log_action(
    request: Request, session: Session | None, action: str, target: str, outcome: str
) -> None:
    """One line of the console's action log."""
    logger.info(
        "console action",
        extra={
            "person": session.user_id if session else "",
            "operator": session.operator_id if session else "",
            "action": action,
            "target": target,
            "outcome": outcome,
            "method": request.method,
            "path": request.url.path,
        },
    )


def field(form: FormData, name: str) -> str:
    value = form.get(name)
    return value.strip() if isinstance(value, str) else ""


Page = Callable[[Request, Session], Awaitable[Response]]


def signed_in_page(page: Page) -> Callable[[Request], Awaitable[Response]]:
    """The page for a signed-in person (others sign in first); a refused form or a service's
    refusal shown as a page with its status."""

    async def endpoint(request: Request) -> Response:
        session = signed_in(request)
        if session is None:
            return sign_in_redirect(request)
        try:
            return await page(request, session)
        except FormRefused:
            return form_refused(request, session)
        except Refused as refused:
            log_action(request, session, request.url.path, "", refused.reason)
            return refused_page(request, session, refused)

    return endpoint


async def people_call(request: Request, session: Session, method: str, message: Any) -> Any:
    """A method of the tool plane's people's API, for the signed-in person."""
    backends = console_of(request).backends
    return await backends.call(
        "toolplane", getattr(backends.people, method), message, session.access_token
    )
