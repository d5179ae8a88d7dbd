"""The registry gathers one module per prompt, and a result converted field by field carries
every value into its proto message, or the registry refuses the prompt."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import typing
from pathlib import Path
from typing import Any, Literal

import pytest
from google.protobuf import json_format
from hypothesis import given, reject
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

import nemo_gateway.prompts
from nemo_gateway.prompts.knowledge import answer
from nemo_gateway.prompts.knowledge.answer import CitationCheckResult, SourceResult
from nemo_gateway.prompts.learner import tutor_hint
from nemo_gateway.prompts.proto_mirror import mirrored, mismatches
from nemo_gateway.prompts.registry import MODULES, REGISTRY, AnySpec, Registry
from nemo_gateway.prompts.spec import Strict

INT32 = st.integers(-(2**31), 2**31 - 1)
HINT: AnySpec = tutor_hint.SPEC
ANSWER: AnySpec = answer.SPEC


def _prompt_modules_on_disk() -> set[str]:
    """Every module under a prompt family package that declares a SPEC, found by walking the
    package directories rather than by reading the registry."""
    root = Path(nemo_gateway.prompts.__file__).parent
    found: set[str] = set()
    for family in (path for path in root.iterdir() if (path / "__init__.py").exists()):
        for info in pkgutil.iter_modules([str(family)]):
            name = f"nemo_gateway.prompts.{family.name}.{info.name}"
            if hasattr(importlib.import_module(name), "SPEC"):
                found.add(name)
    return found


def test_every_prompt_module_is_registered_and_named_after_its_prompt_id() -> None:
    registered, on_disk = {module.__name__ for module in MODULES}, _prompt_modules_on_disk()
    assert not on_disk - registered, (
        f"prompt modules not registered: {sorted(on_disk - registered)}; add each to MODULES "
        "in services/gateway/src/nemo_gateway/prompts/registry.py"
    )
    assert not registered - on_disk, f"MODULES names modules not on disk: {registered - on_disk}"
    for module in MODULES:
        assert module.__name__ == f"nemo_gateway.prompts.{module.SPEC.prompt_id}"
        assert REGISTRY.get(module.SPEC.prompt_id) is module.SPEC


def _values(annotation: Any) -> st.SearchStrategy[Any]:
    """Values of a result field's type, within what its proto field can hold."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is tuple:
        return st.lists(_values(args[0]), max_size=3).map(tuple)
    if origin is Literal:
        return st.sampled_from(args)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _models(annotation)
    strategies: dict[Any, st.SearchStrategy[Any]] = {
        str: st.text(max_size=20),
        bool: st.booleans(),
        int: INT32,
    }
    return strategies[annotation]


def _models(model: type[BaseModel]) -> st.SearchStrategy[Any]:
    """Valid instances: values the model's own constraints refuse are drawn again."""

    def build(values: dict[str, Any]) -> BaseModel:
        try:
            return model(**values)
        except ValidationError:
            reject()

    fields = {name: _values(info.annotation) for name, info in model.model_fields.items()}
    return st.fixed_dictionaries(fields).map(build)


MIRRORED = sorted(
    (spec for spec in REGISTRY if spec.client_view is None), key=lambda spec: spec.prompt_id
)


def test_only_results_with_server_side_fields_have_a_hand_written_client_view() -> None:
    hand_written = {spec.prompt_id for spec in REGISTRY if spec.client_view is not None}
    assert hand_written == {"coral.generate_items", "tutor.summarize_conversation"}
    # A client view exactly where the result does not mirror its message; every other prompt
    # is converted field by field, and the property below runs over it.
    mirroring = {
        spec.prompt_id for spec in REGISTRY if not mismatches(spec.output, spec.output_descriptor)
    }
    assert {spec.prompt_id for spec in MIRRORED} == mirroring


@pytest.mark.parametrize("spec", MIRRORED, ids=lambda spec: spec.prompt_id)
@given(data=st.data())
def test_a_mirrored_result_reaches_its_message_value_for_value(
    spec: AnySpec, data: st.DataObject
) -> None:
    result = data.draw(_models(spec.output))
    output = spec.to_proto(result)
    assert output.WhichOneof("output") == spec.output_field
    expected = json_format.ParseDict(result.model_dump(mode="json"), spec.output_message())
    assert getattr(output, spec.output_field) == expected


class _HintWithExtra(Strict):
    hint: str
    focus_node_id: str
    disclaimer: str
    confidence: str


class _HintMissingOne(Strict):
    hint: str
    disclaimer: str


class _HintWithNestedValue(Strict):
    hint: _HintMissingOne
    focus_node_id: str
    disclaimer: str


class _SourceMissingTitle(Strict):
    number: int
    document_id: str
    flagged_as_instruction: bool


class _AnswerWithShortSource(Strict):
    answer: str
    covered: bool
    sources: tuple[_SourceMissingTitle, ...]
    citation_check: CitationCheckResult
    disclaimer: str


class _AnswerWithFlatCheck(Strict):
    answer: str
    covered: bool
    sources: tuple[SourceResult, ...]
    citation_check: str
    disclaimer: str


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        (
            dataclasses.replace(HINT, output=_HintWithExtra),
            "_HintWithExtra.confidence is not in TutorHint",
        ),
        (
            dataclasses.replace(HINT, output=_HintMissingOne),
            "TutorHint.focus_node_id is not in _HintMissingOne",
        ),
        (
            dataclasses.replace(HINT, output=_HintWithNestedValue),
            "_HintWithNestedValue.hint holds a model, not a value",
        ),
        (
            dataclasses.replace(ANSWER, output=_AnswerWithShortSource),
            "Source.title is not in _SourceMissingTitle",
        ),
        (
            dataclasses.replace(ANSWER, output=_AnswerWithFlatCheck),
            "_AnswerWithFlatCheck.citation_check holds a value, not a model",
        ),
    ],
    ids=["extra", "missing", "model-for-value", "nested-missing", "value-for-model"],
)
def test_a_result_that_does_not_mirror_its_message_is_refused(spec: AnySpec, problem: str) -> None:
    with pytest.raises(ValueError, match="needs a client view") as refused:
        Registry((spec,))
    assert problem in str(refused.value)


def test_a_result_that_does_not_mirror_is_accepted_with_a_client_view() -> None:
    spec = dataclasses.replace(
        HINT,
        output=_HintWithExtra,
        client_view=lambda result: mirrored(
            tutor_hint.TutorHintResult(
                hint=result.hint, focus_node_id=result.focus_node_id, disclaimer=result.disclaimer
            ),
            spec.output_message,
        ),
    )
    registry = Registry((spec,))
    result = _HintWithExtra(hint="h", focus_node_id="n", disclaimer="d", confidence="high")
    assert registry.get(spec.prompt_id) is spec
    assert spec.to_proto(result).tutor_hint.hint == "h"
