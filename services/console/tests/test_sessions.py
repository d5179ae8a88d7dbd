"""Session cookies: what the console sealed opens as it was; anything else opens as nothing."""

from __future__ import annotations

import time
from dataclasses import asdict

from hypothesis import given
from hypothesis import strategies as st

from nemo_console.sessions import Sealer, Session, same_token

KEYS = Sealer.derive(["a-session-key-of-at-least-32-chars!!"])
OTHER = Sealer.derive(["another-session-key-of-32-chars-or-more"])

_SESSIONS = st.builds(
    Session,
    user_id=st.from_regex(r"U-[0-9]{4}-[A-Z][0-9]", fullmatch=True),
    operator_id=st.sampled_from(["", "console-ops"]),
    access_token=st.text(
        st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=20, max_size=900
    ),
    expires_at=st.floats(min_value=time.time() + 60, max_value=time.time() + 86_400),
    csrf_token=st.text(
        st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=10, max_size=60
    ),
)


@given(session=_SESSIONS)
def test_a_sealed_session_opens_as_it_was(session: Session) -> None:
    sealer = Sealer(KEYS)
    assert sealer.open(sealer.seal(asdict(session)), max_age=3600) == asdict(session)


@given(session=_SESSIONS, data=st.data())
def test_an_altered_cookie_opens_as_nothing(session: Session, data: st.DataObject) -> None:
    sealed = Sealer(KEYS).seal(asdict(session))
    position = data.draw(st.integers(0, len(sealed) - 1))
    replacement = data.draw(
        st.sampled_from("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=").filter(
            lambda char: char != sealed[position]
        )
    )
    altered = sealed[:position] + replacement + sealed[position + 1 :]
    assert Sealer(KEYS).open(altered, max_age=3600) in (None, asdict(session))
    # Base64 padding bits aside, a changed character never yields other contents.


@given(session=_SESSIONS)
def test_a_cookie_of_another_key_or_too_old_opens_as_nothing(session: Session) -> None:
    sealed = Sealer(OTHER).seal(asdict(session))
    assert Sealer(KEYS).open(sealed, max_age=3600) is None
    assert Sealer(KEYS).open(Sealer(KEYS).seal(asdict(session)), max_age=-1) is None
    # Rotation: a new key first, the old one still opens what it sealed.
    assert Sealer([*KEYS, *OTHER]).open(sealed, max_age=3600) == asdict(session)


@given(expected=st.text(min_size=1), sent=st.one_of(st.none(), st.text()))
def test_only_the_sessions_own_csrf_token_passes(expected: str, sent: str | None) -> None:
    assert same_token(sent, expected) == (sent == expected)
