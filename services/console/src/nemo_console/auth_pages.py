"""Signing in and out, and the home page that sends each person to their own view."""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from nemo_console.backends import Refused
from nemo_console.i18n import LOCALE_COOKIE, LOCALES
from nemo_console.sessions import Session, new_csrf_token
from nemo_console.signin import SignInFailed, safe_next
from nemo_console.web import (
    FormRefused,
    checked_form,
    console_of,
    form_refused,
    log_action,
    render,
    signed_in,
    url,
)
from nemo_protos.toolplane.v1 import toolplane_admin_service_pb2 as admin_pb


async def home(request: Request) -> Response:
    session = signed_in(request)
    if session is None:
        return render(request, "home.html")
    target = "approvals" if session.is_operator else "family"
    return RedirectResponse(url(request, target), status_code=303)


async def sign_in(request: Request) -> Response:
    console = console_of(request)
    root = console.settings.root_path
    next_path = safe_next(request.query_params.get("next"), root)
    try:
        location, started = await console.provider.begin(next_path)
    except SignInFailed as failed:
        return render(
            request, "error.html", {"title_key": "error_title", "message": str(failed)}, status=503
        )
    response = RedirectResponse(location, status_code=303)
    console.cookies.begin_sign_in(response, started)
    return response


async def callback(request: Request) -> Response:
    console = console_of(request)
    started = console.cookies.sign_in(request)
    state = request.query_params.get("state")
    code = request.query_params.get("code")
    if started is None or not state or state != started.state or not code:
        log_action(request, None, "sign_in", "", "STATE_MISMATCH")
        return render(
            request,
            "error.html",
            {"title_key": "error_title", "message": "the sign-in did not start here"},
            status=400,
        )
    try:
        tokens = await console.provider.finish(started, code)
        person = await console.backends.call(
            "toolplane",
            console.backends.people.GetPerson,
            admin_pb.GetPersonRequest(),
            tokens.access_token,
        )
    except SignInFailed as failed:
        log_action(request, None, "sign_in", "", "PROVIDER_REFUSED")
        return render(
            request, "error.html", {"title_key": "error_title", "message": str(failed)}, status=502
        )
    except Refused as refused:
        log_action(request, None, "sign_in", "", refused.reason)
        return render(
            request,
            "error.html",
            {"title_key": "refused_title", "message": refused.message},
            status=403,
        )
    session = Session(
        user_id=person.user_id,
        operator_id=person.operator_id,
        access_token=tokens.access_token,
        expires_at=min(tokens.expires_at, time.time() + console.settings.session_seconds),
        csrf_token=new_csrf_token(),
    )
    response = RedirectResponse(started.next_path, status_code=303)
    console.cookies.end_sign_in(response)
    console.cookies.start(response, session)
    log_action(request, session, "sign_in", person.user_id, "ok")
    return response


async def sign_out(request: Request) -> Response:
    session = signed_in(request)
    if session is None:
        return RedirectResponse(url(request, "home"), status_code=303)
    try:
        await checked_form(request, session)
    except FormRefused:
        return form_refused(request, session)
    response = RedirectResponse(url(request, "home"), status_code=303)
    console_of(request).cookies.end(response)
    log_action(request, session, "sign_out", session.user_id, "ok")
    return response


async def language(request: Request) -> Response:
    """Keep the person's choice of language; back to the page they were on."""
    chosen = request.path_params["locale"]
    root = console_of(request).settings.root_path
    response = RedirectResponse(safe_next(request.query_params.get("next"), root), status_code=303)
    if chosen in LOCALES:
        response.set_cookie(
            LOCALE_COOKIE,
            chosen,
            max_age=365 * 24 * 3600,
            path=root or "/",
            secure=console_of(request).settings.secure_cookies,
            httponly=True,
            samesite="lax",
        )
    return response
