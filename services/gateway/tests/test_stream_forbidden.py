"""No forbidden pattern reaches the learner, wherever the stream cuts it, and what the learner
received is exactly the stored turn.

The corpus is generated: every forbidden pattern (links in their spellings, score claims in
digits and in words, the learner's pseudonym, another learner's and keys of every shape in their
spellings, markup from the generator of ``nemo_testing.corpora.markup``, markdown links, control,
tag and bidirectional characters) is placed at every offset, one character apart, around each cut
the screen makes (the forced cut of a long run with and without spaces, a sentence end, a line
break, the reply's length bound), and the text is cut into deltas of random sizes.

- In process, the whole sweep runs through the screen with the chat's own check.
- Through the wire (the gateway on loopback, the real context service, the scripted HTTP
  provider in both wire formats), a seeded sample of it runs as real streamed turns, the length
  bound being the gateway's own, and the text the caller received is compared with the stored
  turn.
"""

from __future__ import annotations

import random
import secrets
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from nemo_context.pseudonym import Pseudonymizer
from nemo_core.text import fold_lookalikes
from nemo_gateway.lang import Lang
from nemo_gateway.prompts.spec import PromptInput
from nemo_gateway.prompts.tutor.chat_reply import SPEC as CHAT
from nemo_gateway.prompts.tutor.chat_reply import ChatVariables, reply_char_limit, reply_problem
from nemo_gateway.screen import (
    HOLD_BACK_CHARS,
    MAX_HELD_CHARS,
    ReplyRejected,
    ReplyScreen,
    ReplyTooLong,
)
from nemo_protos.context.v1 import conversation_pb2 as conv
from nemo_protos.gateway.v1 import gateway_service_pb2 as pb
from nemo_testing.corpora.markup import hostile_markup
from nemo_testing.providers import ScriptedProvider, Stream

from .gateway_testing import (
    FIXED_TIME,
    PSEUDONYM_KEY,
    StartGateway,
    chat_session,
    collect_stream,
    stored_messages,
)

LEARNER = "L-2041-1"
REF = Pseudonymizer(PSEUDONYM_KEY.encode()).learner_ref(LEARNER)
OTHER_REF = "nemo_" + "3fa2c4d5e6f7a8b9c0d1e2f3"
ZW = "\u200b"


def _full_width(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def _invisible_inside(text: str) -> str:
    return ZW.join(text)


def _cyrillic(text: str) -> str:
    return text.replace("e", "\u0435").replace("o", "\u043e").replace("a", "\u0430")


@dataclass(frozen=True)
class Forbidden:
    """A pattern as written into the stream, and what of it must never reach the learner."""

    name: str
    written: str
    core: str
    """Folded, this must not be in the folded text the learner received."""


def _spellings(name: str, text: str) -> list[Forbidden]:
    """``text`` as written and in the spellings a check must see through."""
    return [
        Forbidden(f"{name}", text, text),
        Forbidden(f"{name}-upper", text.upper(), text),
        Forbidden(f"{name}-zero-width", _invisible_inside(text), text),
        Forbidden(f"{name}-full-width", _full_width(text), text),
        Forbidden(f"{name}-look-alike", _cyrillic(text), text),
    ]


MARKUP_SAMPLE = 24
SPELLINGS = (str, str.upper, _invisible_inside, _full_width, _cyrillic)


def _markup() -> list[Forbidden]:
    """Generated markup that fits the sweep, each piece in one of the spellings in turn; the
    opener is what must never be shown."""
    pieces = [piece for piece in hostile_markup() if len(piece.text) <= 160][:MARKUP_SAMPLE]
    return [
        Forbidden(f"markup-{number}", spell(piece.text), spell(piece.opener))
        for number, piece in enumerate(pieces)
        for spell in (SPELLINGS[number % len(SPELLINGS)],)
    ]


FORBIDDEN: list[Forbidden] = [
    *_spellings("link", "https://evil.example/giai-bai"),
    *_spellings("www", "www.giaibai.vn/lop-8"),
    *_spellings("domain", "giaibaitap.com"),
    Forbidden("javascript", "javascript:alert(1)", "javascript:"),
    Forbidden("data-uri", "data:text/html;base64,PHNjcmlwdD4=", "data:"),
    Forbidden("ideographic-dot", "giaibai\u3002com", "giaibai\u3002com"),
    *_spellings("pseudonym", REF),
    *_spellings("other-pseudonym", OTHER_REF),
    Forbidden("pseudonym-split", REF.replace("_", " _ "), REF.replace("_", " _ ")),
    *_spellings("key", LEARNER),
    Forbidden("key-en-dash", LEARNER.replace("-", "\u2013"), LEARNER.replace("-", "\u2013")),
    *_spellings("user-key", "U-2041-P1"),
    Forbidden("uuid", "0f8fad5b-d9cb-469f-a165-70867728950e", "0f8fad5b-d9cb"),
    Forbidden("uuid-bare", "0f8fad5bd9cb469fa16570867728950e", "0f8fad5bd9cb469f"),
    Forbidden("prefixed-id", "usr_8f3a2b9c1d4e5f60", "usr_8f3a2b9c1d4e"),
    *_markup(),
    Forbidden("markdown-link", "[bấm vào đây](evil)", "[bấm vào đây]("),
    Forbidden("markdown-image", "![ảnh](x.png)", "![ảnh]("),
    Forbidden("claim-digits", "Em đạt 9/10 điểm", "em dat 9/10 diem"),
    Forbidden("claim-percent", "Em đã đạt 90% bài kiểm tra", "em da dat 90%"),
    Forbidden("claim-words-vi", "Em đạt chín mươi phần trăm", "em dat chin muoi phan tram"),
    Forbidden("claim-words-en", "You scored nine out of ten", "you scored nine out of ten"),
    Forbidden("nul", "a\x00b", "\x00"),
    Forbidden("bidi-override", "\u202eabc", "\u202e"),
    Forbidden("bidi-isolate", "\u2066abc\u2069", "\u2066"),
    Forbidden("tag-characters", "\U000e0069\U000e0067\U000e006e", "\U000e0069"),
]

WORDS = "từng bước "
SENTENCE = "Em làm từng bước nhé. "
LINE = "Em làm từng bước\n"
MAX_DELTA_CHARS = 40
BOUND = 3 * len(SENTENCE) + 7
"""The in-process screen's length bound for the "bound" filler; the wire uses the gateway's."""
WIRE_BOUND = reply_char_limit(CHAT.max_output_tokens)
SWEPT_PATTERN_CHARS = 160
"""Offsets reach this far before a cut: longer patterns are found by their start."""


def _fillers() -> Iterator[tuple[str, str]]:
    """(kind, filler): a long run of words (forced cuts at spaces), one with no space at all
    (forced cuts anywhere), sentences (cuts at sentence ends), lines (cuts at line breaks), and
    sentences past the reply's length bound."""
    yield "words", WORDS * (MAX_HELD_CHARS // len(WORDS) + 20)
    yield "spaceless", "x" * (MAX_HELD_CHARS + 200)
    yield "sentences", SENTENCE * 30
    yield "lines", LINE * 30
    yield "bound", SENTENCE * 30


def _offsets(kind: str, pattern: str, bound: int = BOUND) -> range:
    """Every offset at which the pattern straddles, touches or follows one of the screen's cuts:
    for a long run, from before its first forced cut (held text reaches the limit within one
    delta, and is cut short of its tail) to past it; for sentences and lines, a whole sentence's
    or line's span after a few of them; for the bound, from the pattern's end at the bound to
    its start past it."""
    reach = min(len(pattern), SWEPT_PATTERN_CHARS)
    if kind in ("sentences", "lines"):
        unit = len(SENTENCE if kind == "sentences" else LINE)
        return range(3 * unit, 4 * unit + 1)
    if kind == "bound":
        return range(bound - reach - 2, bound + 2)
    first = MAX_HELD_CHARS - HOLD_BACK_CHARS - reach - 2
    return range(first, MAX_HELD_CHARS - HOLD_BACK_CHARS + MAX_DELTA_CHARS + 2)


def _reply(filler: str, offset: int, pattern: str) -> str:
    return f"{filler[:offset]} {pattern} {filler[offset : offset + 60]}. Cố lên nhé."


def _deltas(text: str, rng: random.Random) -> tuple[str, ...]:
    pieces, start = [], 0
    while start < len(text):
        size = rng.randint(1, MAX_DELTA_CHARS)
        pieces.append(text[start : start + size])
        start += size
    return tuple(pieces)


def _prompt() -> PromptInput[ChatVariables]:
    variables = ChatVariables(session_id="S", turn_id="T", user_message="?")
    bundle = conv.ConversationBundle(learner_ref=REF)
    return PromptInput(variables, Lang.VI, datetime(2026, 1, 1, tzinfo=UTC), conversation=bundle)


def _assert_not_reached(received: str, forbidden: Forbidden, prompt: PromptInput[Any]) -> None:
    if core := fold_lookalikes(forbidden.core):
        assert core not in fold_lookalikes(received), forbidden.name
    assert forbidden.core not in received, forbidden.name
    assert reply_problem(received, prompt) is None, forbidden.name


def _screened(deltas: tuple[str, ...], prompt: PromptInput[ChatVariables], bound: int) -> str:
    """What the learner sees of a reply streamed in these deltas."""
    screen = ReplyScreen(
        lambda text: reply_problem(text, prompt), max_chars=bound, max_deltas=100_000
    )
    try:
        for delta in deltas:
            screen.feed(delta)
        screen.flush()
    except (ReplyRejected, ReplyTooLong):
        pass
    assert len(screen.shown_text) <= bound
    return screen.shown_text


def test_no_forbidden_pattern_gets_through_the_screen_at_any_cut() -> None:
    prompt = _prompt()
    rng = random.Random(29)  # noqa: S311  a reproducible corpus, not a secret
    cases = 0
    for forbidden in FORBIDDEN:
        for kind, filler in _fillers():
            bound = BOUND if kind == "bound" else 100_000
            for offset in _offsets(kind, forbidden.written):
                text = _reply(filler, offset, forbidden.written)
                received = _screened(_deltas(text, rng), prompt, bound)
                _assert_not_reached(received, forbidden, prompt)
                cases += 1
    assert cases > 15_000


# Through the wire: a sample, each pattern in two kinds of filler (every kind in turn), at a
# random offset.
SAMPLE_SEED = 2029
WIRE_KINDS_PER_PATTERN = 2


def _wire_cases() -> list[tuple[str, Forbidden, str, tuple[str, ...]]]:
    rng = random.Random(SAMPLE_SEED)  # noqa: S311  a reproducible sample
    fillers = list(_fillers())
    cases = []
    for number, forbidden in enumerate(FORBIDDEN):
        for turn in range(WIRE_KINDS_PER_PATTERN):
            kind, filler = fillers[(number + turn) % len(fillers)]
            if kind == "bound":
                # The gateway's own bound: the reply runs past it.
                filler = SENTENCE * (WIRE_BOUND // len(SENTENCE) + 2)
                offset = rng.choice(_offsets(kind, forbidden.written, WIRE_BOUND))
            else:
                offset = rng.choice(_offsets(kind, forbidden.written))
            text = _reply(filler, offset, forbidden.written)
            wire = rng.choice(("openai", "anthropic"))
            cases.append((wire, forbidden, kind, _deltas(text, rng)))
    return cases


@pytest.fixture
async def session(owner_dsn: str) -> AsyncIterator[str]:
    async with chat_session(owner_dsn, LEARNER) as session_id:
        yield session_id


async def test_through_the_wire_nothing_forbidden_arrives_and_the_turn_is_what_arrived(
    start_gateway: StartGateway,
    provider: ScriptedProvider,
    context_address: str,
    session: str,
    owner_dsn: str,
) -> None:
    prompt = _prompt()
    gateways = {
        wire: await start_gateway(provider=wire, context_address=context_address)
        for wire in ("openai", "anthropic")
    }
    for wire, forbidden, kind, deltas in _wire_cases():
        provider.script_stream(Stream(deltas))
        request = pb.StreamPromptRequest(
            prompt_id="tutor.chat_reply",
            session_id=session,
            turn_id="T2",
            user_message=f"Câu hỏi {secrets.token_hex(2)}",
            evaluate_time=FIXED_TIME,
        )
        received, _, _ = await collect_stream(gateways[wire], request)
        text = "".join(received)
        _assert_not_reached(text, forbidden, prompt)
        stored = await stored_messages(owner_dsn, session, "T2")
        assert stored[1][2] == text, (forbidden.name, kind, wire)
