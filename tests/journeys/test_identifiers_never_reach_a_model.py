"""No name, contact, address, school or birth date of a child or of the people around the child
reaches a model, through the real gateway and its real HTTP provider: the request bodies the
scripted provider server receives hold none of them, whatever the carrier (a chat message, a
stored reply, a tool summary, the summary, the state, a goal title) and the spelling.

The identifiers are read from the seeded columns with the owner role (the services never can);
the spellings are this file's own.
"""

from __future__ import annotations

import json
import re
import secrets
import unicodedata
from collections.abc import AsyncIterator, Iterator
from datetime import date
from typing import Any
from urllib.parse import quote, unquote

import pytest
from google.protobuf import struct_pb2

from nemo_core.db import connect
from nemo_protos.gateway.v1 import gateway_service_pb2 as gateway_pb
from nemo_testing.providers import Answer, ScriptedProvider, Stream
from tests.stack import Stack

from .support import clients

LEARNER = "L-2041-2"


def _plain(text: str) -> str:
    """Lower case, no diacritics, "đ" as "d", words separated by one space."""
    decomposed = unicodedata.normalize("NFKD", text.replace("đ", "d").replace("Đ", "D"))
    kept = "".join(char for char in decomposed if not unicodedata.combining(char)).lower()
    return " ".join("".join(c if c.isalnum() else " " for c in kept).split())


def _spellings(text: str) -> Iterator[str]:
    """A person writing an identifier: as stored, without diacritics, in capitals, with
    underscores, full-width, with a Cyrillic look-alike, percent-encoded."""
    yield text
    yield _plain(text)
    yield text.upper()
    yield text.replace(" ", "_")
    yield "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)
    yield text.replace("a", "\u0430")
    yield quote(text, safe="")


async def _circle(owner_dsn: str) -> dict[str, list[str]]:
    """The seeded identifiers of the learner's circle, by kind."""
    conn = await connect(owner_dsn)
    try:
        kids = await conn.fetch(
            "SELECT display_name, email, phone, address, school_name, birth_date"
            " FROM learning.learners WHERE family_id ="
            " (SELECT family_id FROM learning.learners WHERE id = $1)",
            LEARNER,
        )
        users = await conn.fetch(
            "SELECT display_name, email, phone FROM learning.users WHERE id IN ("
            " SELECT user_id FROM learning.family_members WHERE family_id ="
            "  (SELECT family_id FROM learning.learners WHERE id = $1)"
            " UNION SELECT user_id FROM learning.guardians WHERE learner_id = $1"
            " UNION SELECT mentor_user_id FROM learning.mentor_assignments WHERE learner_id = $1)",
            LEARNER,
        )
    finally:
        await conn.close()
    people = [*kids, *users]
    birth: date = kids[0]["birth_date"]
    return {
        "name": [p["display_name"] for p in people],
        "email": [p["email"] for p in people if p["email"]],
        "phone": [p["phone"] for p in people if p["phone"]],
        "address": [k["address"] for k in kids if k["address"]],
        "school": [k["school_name"] for k in kids if k["school_name"]],
        "birth_date": [birth.strftime("%d/%m/%Y"), birth.isoformat()],
    }


def _traces(circle: dict[str, list[str]]) -> set[str]:
    """What must not be in a request body, in the plain form of :func:`_plain`: every name of
    two words or more, every e-mail's local part, every phone's digits, every address's first
    part, every school's own name, the birth date."""
    traces = set()
    for name in circle["name"]:
        words = _plain(name).split()
        traces |= {" ".join(words), " ".join(words[1:]), f"{words[-1]} {words[0]}"}
    traces |= {_plain(email.split("@")[0]) for email in circle["email"]}
    traces |= {"".join(c for c in phone if c.isdigit())[1:] for phone in circle["phone"]}
    traces |= {_plain(address.split(",")[0]) for address in circle["address"]}
    traces |= {_plain(school).split(" ", 2)[-1] for school in circle["school"]}
    traces |= {_plain(day) for day in circle["birth_date"]}
    return traces


def _carried(circle: dict[str, list[str]]) -> list[str]:
    """Sentences a person would write, each carrying one identifier in one spelling."""
    sentences = []
    for kind, values in circle.items():
        for value in values:
            for index, spelled in enumerate(_spellings(value)):
                if kind == "name":
                    sentences.append(f"Bạn {spelled} hỏi bài {index}.")
                elif kind == "school":
                    sentences.append(f"Em học ở {spelled} ({index}).")
                else:
                    sentences.append(f"Liên hệ: {spelled} ({kind} {index})")
    return sentences


def _body_text(body: dict[str, Any]) -> str:
    """Every string of a request body, decoded, in plain form; digits also run together."""
    strings: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            strings.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(body)
    # Decoded as a reader would: percent-encoding undone, look-alike letters read as Latin.
    text = unquote("\n".join(strings)).replace("\u0430", "a")
    runs = ["".join(c for c in run if c.isdigit()) for run in _DIGIT_RUN.findall(text)]
    return _plain(text) + "\n" + "\n".join(runs)


_DIGIT_RUN = re.compile(r"\d(?:[\s.\-()+_/]{0,3}\d)+")


@pytest.fixture
async def poisoned_session(stack: Stack) -> AsyncIterator[tuple[str, list[str]]]:
    """A chat session of the learner whose stored history, summary, state and tool summaries
    carry the circle's identifiers, and a goal titled with them; removed afterwards."""
    circle = await _circle(stack.owner_dsn)
    sentences = _carried(circle)
    session_id = f"CS-IDENT-{secrets.token_hex(6)}"
    conn = await connect(stack.owner_dsn)
    try:
        await conn.execute(
            "INSERT INTO learning.chat_sessions (id, learner_id) VALUES ($1, $2)",
            session_id,
            LEARNER,
        )
        rows = []
        for seq, sentence in enumerate(sentences[0::3], start=1):
            role, kind = ("user", "text") if seq % 3 else ("tool", "tool_result")
            rows.append((f"{session_id}-M{seq}", f"T{seq // 2}", seq, role, kind, sentence))
        await conn.executemany(
            "INSERT INTO learning.chat_messages (id, session_id, learner_id, turn_id, seq, role,"
            " type, status, content) VALUES ($1, $2, $3, $4, $5, $6, $7, 'completed', $8)",
            [(m, session_id, LEARNER, t, s, r, k, c) for m, t, s, r, k, c in rows],
        )
        await conn.execute(
            "INSERT INTO learning.conversation_summaries"
            " (session_id, learner_id, version, summary, covers_through_seq, covered_turns)"
            " VALUES ($1, $2, 1, $3, 2, 1)",
            session_id,
            LEARNER,
            " ".join(sentences[1::6]),
        )
        await conn.execute(
            "INSERT INTO learning.conversation_state (session_id, learner_id, extracted_info,"
            " agent_state) VALUES ($1, $2, $3, '{}')",
            session_id,
            LEARNER,
            json.dumps({"notes": sentences[2::6]}, ensure_ascii=False),
        )
        await conn.execute(
            "INSERT INTO learning.goals (id, learner_id, title, target, status, created_at)"
            " VALUES ($1, $2, $3, $4, 'active', now() - interval '1 day')",
            f"G-{session_id}",
            LEARNER,
            " ".join(sentences[4::12]),
            " ".join(sentences[10::12]),
        )
        yield session_id, sentences
    finally:
        await conn.execute("DELETE FROM learning.goals WHERE id = $1", f"G-{session_id}")
        await conn.execute("DELETE FROM learning.chat_sessions WHERE id = $1", session_id)
        await conn.close()


async def test_no_request_body_a_provider_receives_holds_an_identifier_of_the_circle(
    stack: Stack, scripted_provider: ScriptedProvider, poisoned_session: tuple[str, list[str]]
) -> None:
    session_id, sentences = poisoned_session
    traces = _traces(await _circle(stack.owner_dsn))
    scripted_provider.reset()
    scripted_provider.script_stream(*(Stream(("Được em.",)) for _ in range(8)))
    scripted_provider.script(*(Answer(json.dumps({"explanation": "Cố lên."})) for _ in range(8)))
    async with clients(stack) as grpc_clients:
        for turn, message in enumerate(sentences[5::14], start=100):
            request = gateway_pb.StreamPromptRequest(
                prompt_id="tutor.chat_reply",
                session_id=session_id,
                turn_id=f"T{turn}",
                user_message=message,
            )
            async for _ in grpc_clients.gateway.StreamPrompt(request, timeout=20):
                pass
        await grpc_clients.gateway.RunPrompt(
            gateway_pb.RunPromptRequest(
                prompt_id="learner.plan_explanation",
                learner_id=LEARNER,
                variables=struct_pb2.Struct(),
            ),
            timeout=20,
        )
    assert len(scripted_provider.requests) >= 9
    raw = [recorded.body.decode() for recorded in scripted_provider.requests]
    for recorded in scripted_provider.requests:
        body = _body_text(recorded.json())
        assert {trace for trace in traces if trace in body} == set()
    # The placeholders stand where the identifiers were, in chat and in the goal alike.
    for placeholder in ("[name]", "[email]", "[phone]", "[address]", "[school]", "[birth date]"):
        assert any(placeholder in body for body in raw), placeholder
