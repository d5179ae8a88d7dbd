"""The evaluation's measures and invariants, on runs made up here (the live run is `make eval`)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from nemo_eval import metrics, report
from nemo_eval.cases import CASES, Case
from nemo_eval.runner import Result

HINT = Case("learner.tutor_hint", "L-2041-1", learner_id="L-2041-1")
ANSWER = Case("knowledge.answer", "q", variables={"question": "q"}, covered=True)
OFF_TOPIC = Case("knowledge.answer", "q2", variables={"question": "q2"}, covered=False)


def _result(case: Case, path: str = "MODEL", reason: str = "", **fields: object) -> Result:
    result = Result(case, path, reason, 1, 1.0, 100, 20)
    for name, value in fields.items():
        setattr(result, name, value)
    return result


def _body(text: str) -> bytes:
    return json.dumps({"messages": [{"role": "user", "content": text}]}).encode()


@pytest.mark.parametrize(
    "leak",
    ["Học sinh L-2041-1 cần ôn", "Nguyễn Minh An", "minhan.nguyen.hs@example.com", "2012-10-14",
     "0981 246 135", "Trường THCS Nghĩa Tân"],
)  # fmt: skip
def test_an_identifier_in_a_body_the_provider_received_is_a_violation(leak: str) -> None:
    found = metrics.violations([_result(HINT, sent=[_body(f"ngữ cảnh: {leak}.")])])
    assert [v.invariant for v in found] == ["identifier in a prompt"]


@pytest.mark.parametrize(
    ("text", "matched"),
    [
        ("Học sinh nemo_1a2b3c4d5e6f, lớp 8", []),
        ("mã AL-1B không phải của học sinh", []),
        # L-2041-10 is a seeded learner of its own: its id matches its pattern, never L-2041-1's.
        ("L-2041-10 cần ôn tập", ["(?<![\\w-])L\\-2041\\-10(?![\\w-])"]),
    ],
)
def test_ids_match_as_whole_words_only(text: str, matched: list[str]) -> None:
    found = metrics.violations([_result(HINT, sent=[_body(text)])])
    assert [v.detail for v in found] == matched


@pytest.mark.parametrize(
    ("text", "broken"),
    [
        ("Em đạt 8/10 điểm rồi!", True),
        ("Mức độ thành thạo của em là 75%.", True),
        ("Your mastery score is 0.8.", True),
        ("Tính 25% của 80.", False),
        ("Hãy nhớ (a + b)² = a² + 2ab + b².", False),
    ],
)
def test_a_served_model_text_with_a_score_is_a_violation(text: str, broken: bool) -> None:
    found = metrics.violations([_result(HINT, texts=[text])])
    assert bool(found) is broken
    # The same text in a fallback is the baseline's, not the model's.
    assert metrics.violations([_result(HINT, "FALLBACK", "GUARDRAIL_REJECTED", texts=[text])]) == []


def test_an_uncited_or_bogus_model_answer_is_a_violation() -> None:
    assert metrics.violations([_result(ANSWER, covered=True, uncited_sentences=1)])
    assert metrics.violations(
        [_result(ANSWER, "REPAIRED", "REASKED", covered=True, invalid_citations=1)]
    )
    assert metrics.violations([_result(ANSWER, covered=True, valid_citations=2)]) == []
    assert metrics.violations([_result(ANSWER, "FALLBACK", "ATTEMPTS_EXHAUSTED", covered=True,
                                       uncited_sentences=3)]) == []  # fmt: skip


def test_the_summary_counts_paths_by_reason_and_unknown_tokens_stay_unknown() -> None:
    runs = [
        _result(HINT),
        _result(HINT, "FALLBACK", "TRUNCATED"),
        _result(HINT, "FALLBACK", "TRUNCATED", input_tokens=None),
        _result(ANSWER, covered=True, valid_citations=2),
        _result(OFF_TOPIC, "FALLBACK", "NO_SOURCES", covered=False),
    ]
    hint, answer = metrics.summarise(runs, {"learner.tutor_hint": Counter({"hint is empty": 2})})
    assert hint.paths == {"FALLBACK/TRUNCATED": 2, "MODEL": 1}
    assert hint.model_share == pytest.approx(1 / 3)
    assert (hint.input_tokens, hint.output_tokens) == (None, 60)
    assert hint.guardrail_rejections == {"hint is empty": 2}
    assert answer.citations == {"valid": 2, "bogus": 0, "uncited_sentences": 0}
    assert answer.not_covered_accuracy == 1.0


def test_the_report_files_and_the_comparison(tmp_path: Path) -> None:
    reports = metrics.summarise([_result(HINT), _result(ANSWER, covered=False)], {})
    for label in ("a", "b"):
        report.write_json(tmp_path / f"{label}.json", {"label": label}, reports, [])
    report.write_chart(tmp_path / "a.png", "paths", reports)
    assert (tmp_path / "a.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    document = json.loads((tmp_path / "a.json").read_text())
    assert [p["prompt_id"] for p in document["prompts"]] == [
        "learner.tutor_hint",
        "knowledge.answer",
    ]
    assert document["prompts"][1]["not_covered_accuracy"] == 0.0
    assert "learner.tutor_hint" in report.table(reports)
    assert "100%" in report.compare(tmp_path / "a.json", tmp_path / "b.json")


def test_the_input_set_covers_every_prompt_a_caller_can_run() -> None:
    from nemo_gateway.prompts.registry import REGISTRY
    from nemo_gateway.prompts.spec import Rpc

    callable_prompts = {spec.prompt_id for spec in REGISTRY if spec.rpc is not Rpc.INTERNAL}
    covered = {case.prompt_id for case in CASES}
    assert not callable_prompts - covered, (
        f"no evaluation case runs {sorted(callable_prompts - covered)}: add cases for it to "
        "CASES in eval/src/nemo_eval/cases.py"
    )
    assert not covered - callable_prompts, (
        f"cases name prompts no caller can run: {sorted(covered - callable_prompts)}; remove "
        "them from eval/src/nemo_eval/cases.py"
    )
    labelled = [case.covered for case in CASES if case.prompt_id == "knowledge.answer"]
    assert set(labelled) == {True, False}


def test_the_texts_of_an_output_are_its_string_fields_ids_aside() -> None:
    from nemo_eval.runner import _texts
    from nemo_protos.gateway.v1 import outputs_pb2

    portrait = outputs_pb2.PortraitSummary(
        summary="Tóm tắt.", strengths=["Chăm chỉ", "Cẩn thận"], growth_areas=[], disclaimer="AI"
    )
    assert _texts(portrait) == ["Tóm tắt.", "Chăm chỉ", "Cẩn thận", "AI"]
    hint = outputs_pb2.TutorHint(hint="Gợi ý", focus_node_id="math-08", disclaimer="AI")
    assert _texts(hint) == ["Gợi ý", "AI"]


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("NEMO_GATEWAY_LLM_API_KEY", True),
        ("NEMO_GATEWAY_LLM_API_KEY_FILE", True),
        ("NEMO_GATEWAY_CALLER_TOKENS", True),
        ("NEMO_GATEWAY_CLIENT_TOKEN_FILE", True),
        ("NEMO_GATEWAY_OUTPUT_TOKEN_LIMIT", False),
        ("NEMO_GATEWAY_MODEL_FAST", False),
    ],
)
def test_the_report_keeps_settings_but_never_secrets(name: str, secret: bool) -> None:
    from nemo_eval.stack import _SECRET

    assert bool(_SECRET.search(name)) is secret
