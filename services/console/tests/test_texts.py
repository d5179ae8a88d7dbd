"""Every word a page shows exists in both languages, and a summary says what a call would do."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from nemo_console.i18n import PHRASES, choose
from nemo_console.views import SUMMARY_CHARS, summary
from nemo_protos.context.v1 import context_service_pb2, rights_service_pb2
from nemo_protos.toolplane.v1 import approval_pb2
from nemo_protos.type.v1 import user_source_pb2

TEMPLATES = Path(__file__).resolve().parents[1] / "src" / "nemo_console" / "templates"


def _enum_names(enum: Any, prefix: str) -> set[str]:
    names = {name.removeprefix(prefix).lower() for name in enum.DESCRIPTOR.values_by_name}
    return names - {"unspecified"}


def test_every_phrase_a_template_names_is_in_both_languages() -> None:
    used = set()
    for template in TEMPLATES.glob("*.html"):
        used |= set(re.findall(r"""t\(\s*["']([a-z_]+)["']\s*\)""", template.read_text()))
    # Phrases named by a prefix and a value the services send.
    used |= {f"status_{n}" for n in _enum_names(approval_pb2.ApprovalStatus, "APPROVAL_STATUS_")}
    used |= {f"user_source_{n}" for n in _enum_names(user_source_pb2.UserSource, "USER_SOURCE_")}
    used |= {f"rights_{n}" for n in _enum_names(rights_service_pb2.RightsKind, "RIGHTS_KIND_")}
    used |= {
        f"relation_{n}"
        for n in _enum_names(context_service_pb2.LearnerRelation, "LEARNER_RELATION_")
    }
    missing = sorted(key for key in used if key not in PHRASES)
    assert missing == []
    assert all(vi and en and vi != en for vi, en in (PHRASES[key] for key in used)), used


@given(cookie=st.one_of(st.none(), st.text(max_size=5)), header=st.one_of(st.none(), st.text()))
def test_the_language_is_always_one_the_console_speaks(
    cookie: str | None, header: str | None
) -> None:
    assert choose(cookie, header) in ("vi", "en")


@given(
    arguments=st.dictionaries(
        st.from_regex(r"[a-z_]{1,12}", fullmatch=True),
        st.one_of(st.text(max_size=20), st.integers(), st.booleans()),
        min_size=1,
        max_size=4,
    )
)
def test_a_summary_names_the_tool_and_every_argument_or_is_cut(
    arguments: dict[str, object],
) -> None:
    text = summary("application.set_status:v1", json.dumps(arguments))
    assert text.startswith("application.set_status:")
    assert len(text) <= SUMMARY_CHARS
    if not text.endswith("…"):
        assert all(f"{name} = " in text for name in arguments)
