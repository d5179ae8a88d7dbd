"""gRPC handlers of the gateway; each checks its request and delegates to the runner or the
chat streamer."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime
from typing import Any, TypeAlias, TypeVar

import grpc.aio
from google.protobuf import json_format, struct_pb2, timestamp_pb2
from pydantic import ValidationError

from nemo_core.callers import current_caller
from nemo_core.limits import KeyedInFlightLimit
from nemo_core.structs import ValueNotSet, value_to_python
from nemo_gateway.chat import ChatStreamer
from nemo_gateway.errors import (
    invalid_evaluate_time,
    invalid_variables,
    learner_data_refused,
    learner_required,
    unknown_prompt,
    wrong_rpc,
)
from nemo_gateway.lang import Lang
from nemo_gateway.prompts.knowledge.answer import AnswerVariables
from nemo_gateway.prompts.proto_mirror import mirrored
from nemo_gateway.prompts.registry import REGISTRY, AnySpec
from nemo_gateway.prompts.spec import Rpc, Strict
from nemo_gateway.prompts.tutor.chat_reply import ChatVariables
from nemo_gateway.runner import Clock, PromptRunner
from nemo_protos.gateway.v1 import answer_pb2
from nemo_protos.gateway.v1 import gateway_service_pb2 as pb
from nemo_protos.gateway.v1 import gateway_service_pb2_grpc as pb_grpc

Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]
S = TypeVar("S", bound=Strict)

ANSWER_PROMPT = "knowledge.answer"
# Which prompts each RPC may run; internal prompts are run by the gateway only.
_SERVED_BY: Mapping[str, frozenset[Rpc]] = {
    "RunPrompt": frozenset({Rpc.RUN_PROMPT, Rpc.ANSWER}),
    "StreamPrompt": frozenset({Rpc.STREAM_PROMPT}),
}


def _spec(prompt_id: str, rpc: str) -> AnySpec:
    spec = REGISTRY.get(prompt_id)
    if spec is None:
        raise unknown_prompt(prompt_id)
    if spec.rpc not in _SERVED_BY[rpc]:
        raise wrong_rpc(prompt_id, rpc)
    return spec


def _validate(model: type[S], prompt_id: str, values: Mapping[str, Any]) -> S:
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or '(root)'}: {error['msg']}"
            for error in exc.errors(include_url=False, include_input=False)
        )
        raise invalid_variables(prompt_id, problems) from None


def _clock(evaluated_at: timestamp_pb2.Timestamp, present: bool) -> Clock:
    if present:
        try:
            return Clock(evaluated_at.ToDatetime(tzinfo=UTC), from_server=False)
        except ValueError:
            # Outside the Timestamp range (years 1 to 9999) or nanos out of range.
            raise invalid_evaluate_time() from None
    return Clock(datetime.now(UTC), from_server=True)


def _variables(prompt_id: str, variables: struct_pb2.Struct) -> dict[str, Any]:
    """The request's variables as plain Python; a value with nothing set is invalid."""
    values: dict[str, Any] = {}
    for key, item in variables.fields.items():
        try:
            values[key] = value_to_python(item)
        except ValueNotSet:
            raise invalid_variables(prompt_id, f"{key}: a value has no kind set") from None
    return values


class GatewayServicer(pb_grpc.GatewayServiceServicer):
    """The GatewayService RPCs."""

    def __init__(
        self,
        runner: PromptRunner,
        chat: ChatStreamer,
        callers: KeyedInFlightLimit,
        *,
        ai_enrichment_enabled: bool = True,
    ) -> None:
        self._runner = runner
        self._chat = chat
        self._callers = callers
        self._ai_enrichment_enabled = ai_enrichment_enabled

    async def RunPrompt(
        self, request: pb.RunPromptRequest, context: Context
    ) -> pb.RunPromptResponse:
        spec = _spec(request.prompt_id, "RunPrompt")
        if spec.purpose is None and request.learner_id:
            raise learner_data_refused(spec.prompt_id)
        if spec.purpose is not None and not request.learner_id:
            raise learner_required(spec.prompt_id)
        values = _variables(spec.prompt_id, request.variables)
        variables = _validate(spec.variables, spec.prompt_id, values)
        clock = _clock(request.evaluate_time, request.HasField("evaluate_time"))
        caller = current_caller()
        with self._callers.hold(caller):
            prepared = await self._runner.prepare(
                spec,
                variables,
                lang=Lang.from_proto(request.locale),
                clock=clock,
                learner_id=request.learner_id,
                caller=caller,
            )
            result = await self._runner.execute(prepared, clock)
        return pb.RunPromptResponse(output=spec.to_proto(result.output), run=result.record)

    async def StreamPrompt(
        self, request: pb.StreamPromptRequest, context: Context
    ) -> AsyncIterator[pb.StreamPromptResponse]:
        spec = _spec(request.prompt_id, "StreamPrompt")
        variables = _validate(
            ChatVariables,
            spec.prompt_id,
            {
                "session_id": request.session_id,
                "turn_id": request.turn_id,
                "user_message": request.user_message,
                "token_budget": request.token_budget,
            },
        )
        clock = _clock(request.evaluate_time, request.HasField("evaluate_time"))
        with self._callers.hold(current_caller()):
            async for response in self._chat.stream(
                spec, variables, Lang.from_proto(request.locale), clock
            ):
                yield response

    async def Answer(self, request: pb.AnswerRequest, context: Context) -> pb.AnswerResponse:
        spec = _spec(ANSWER_PROMPT, "RunPrompt")
        variables = _validate(
            AnswerVariables,
            spec.prompt_id,
            {
                "question": request.question,
                "detailed": request.detailed,
                "passages": [
                    json_format.MessageToDict(passage, preserving_proto_field_name=True)
                    for passage in request.passages
                ],
            },
        )
        clock = _clock(request.evaluate_time, request.HasField("evaluate_time"))
        caller = current_caller()
        with self._callers.hold(caller):
            prepared = await self._runner.prepare(
                spec,
                variables,
                lang=Lang.from_proto(request.locale),
                clock=clock,
                learner_id="",
                caller=caller,
            )
            result = await self._runner.execute(prepared, clock)
        return pb.AnswerResponse(
            answer=mirrored(result.output, answer_pb2.GroundedAnswer), run=result.record
        )

    async def ListPrompts(
        self, request: pb.ListPromptsRequest, context: Context
    ) -> pb.ListPromptsResponse:
        return pb.ListPromptsResponse(
            prompts=[spec.describe() for spec in REGISTRY],
            ai_enrichment_enabled=self._ai_enrichment_enabled,
        )
