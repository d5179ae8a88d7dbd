"""Runs the cases against the gateway, one at a time, and keeps what each run produced and what
the provider received for it."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import grpc
import grpc.aio
from google.protobuf import struct_pb2, timestamp_pb2

from nemo_core.errors import error_details
from nemo_eval.cases import EVALUATED_AT_SECONDS, Case
from nemo_eval.stack import EvalStack
from nemo_protos.gateway.v1 import gateway_service_pb2 as pb
from nemo_protos.gateway.v1 import gateway_service_pb2_grpc, run_pb2

DEADLINE_SECONDS = 400.0
"""Each call's deadline: the re-asks of a slow model included."""

PATHS = {
    run_pb2.RUN_PATH_MODEL: "MODEL",
    run_pb2.RUN_PATH_REPAIRED: "REPAIRED",
    run_pb2.RUN_PATH_FALLBACK: "FALLBACK",
}


@dataclass
class Result:
    """One case's run."""

    case: Case
    path: str
    reason: str
    attempts: int
    seconds: float
    input_tokens: int | None
    output_tokens: int | None
    texts: list[str] = field(default_factory=list)
    """The learner-facing texts of the output."""
    covered: bool | None = None
    valid_citations: int = 0
    invalid_citations: int = 0
    uncited_sentences: int = 0
    sent: list[bytes] = field(default_factory=list)
    """Every body the provider received for this case."""
    error: str = ""
    """The gRPC status of a failed call ("" when it returned)."""


def _usage(run: run_pb2.RunRecord) -> tuple[int | None, int | None]:
    usage = run.usage
    return (
        None if usage.input_tokens_unknown else usage.input_tokens,
        None if usage.output_tokens_unknown else usage.output_tokens,
    )


def _texts(output: object) -> list[str]:
    """The string fields of an output message, repeated ones included."""
    texts: list[str] = []
    for descriptor, value in output.ListFields():  # type: ignore[attr-defined]
        if descriptor.type != descriptor.TYPE_STRING or descriptor.name.endswith("_id"):
            continue
        texts.extend([value] if isinstance(value, str) else value)
    return texts


class Runner:
    """Sends the cases to the gateway, each on a connection of its own: the server asks a
    client to reconnect once a connection is older than its maximum age, and a call still
    running a grace period later is cut, which a slow model's call can outlast."""

    def __init__(self, stack: EvalStack) -> None:
        self._stack = stack
        self._metadata = ((stack.metadata_key, stack.internal_token),)
        self._turns = 0

    async def run(self, case: Case) -> Result:
        first = len(self._stack.proxy.requests)
        started = time.monotonic()
        try:
            async with grpc.aio.insecure_channel(self._stack.gateway_address) as channel:
                stub: gateway_service_pb2_grpc.GatewayServiceAsyncStub = (
                    gateway_service_pb2_grpc.GatewayServiceStub(channel)
                )
                result = await self._call(stub, case)
        except grpc.aio.AioRpcError as failed:
            reason = error_details(failed).reason or failed.code().name
            result = Result(case, "ERROR", reason, 0, 0.0, None, None)
            result.error = failed.code().name
        result.seconds = time.monotonic() - started
        result.sent = [request.body for request in self._stack.proxy.requests[first:]]
        return result

    async def _call(
        self, stub: gateway_service_pb2_grpc.GatewayServiceAsyncStub, case: Case
    ) -> Result:
        evaluated_at = timestamp_pb2.Timestamp(seconds=EVALUATED_AT_SECONDS)
        if case.prompt_id == "knowledge.answer":
            answer = await stub.Answer(
                pb.AnswerRequest(question=case.variables["question"], evaluate_time=evaluated_at),
                metadata=self._metadata,
                timeout=DEADLINE_SECONDS,
            )
            result = self._result(case, answer.run)
            grounded = answer.answer
            result.texts = [grounded.answer] if result.path != "FALLBACK" else []
            result.covered = grounded.covered
            check = grounded.citation_check
            result.valid_citations = len(check.valid_citations)
            result.invalid_citations = len(check.invalid_citations)
            result.uncited_sentences = check.uncited_sentence_count
            return result
        if case.prompt_id == "tutor.chat_reply":
            return await self._chat(stub, case, evaluated_at)
        variables = struct_pb2.Struct()
        variables.update(case.variables)
        response = await stub.RunPrompt(
            pb.RunPromptRequest(
                prompt_id=case.prompt_id,
                learner_id=case.learner_id,
                variables=variables,
                evaluate_time=evaluated_at,
            ),
            metadata=self._metadata,
            timeout=DEADLINE_SECONDS,
        )
        result = self._result(case, response.run)
        output = getattr(response.output, response.output.WhichOneof("output") or "", None)
        if output is not None and result.path != "FALLBACK":
            result.texts = _texts(output)
        return result

    async def _chat(
        self,
        stub: gateway_service_pb2_grpc.GatewayServiceAsyncStub,
        case: Case,
        evaluated_at: timestamp_pb2.Timestamp,
    ) -> Result:
        self._turns += 1
        request = pb.StreamPromptRequest(
            prompt_id=case.prompt_id,
            session_id=case.session_id,
            turn_id=f"EVAL-{self._turns}",
            user_message=case.message,
            evaluate_time=evaluated_at,
        )
        deltas: list[str] = []
        completed: pb.StreamPromptResponse | None = None
        async for event in stub.StreamPrompt(
            request, metadata=self._metadata, timeout=DEADLINE_SECONDS
        ):
            if event.HasField("text_delta"):
                deltas.append(event.text_delta)
            else:
                completed = event
        if completed is None:  # a stream that returns ends with its completed event
            raise RuntimeError("the stream ended without its completed event")
        result = self._result(case, completed.completed.run)
        if result.path != "FALLBACK":
            result.texts = ["".join(deltas)]
        return result

    @staticmethod
    def _result(case: Case, run: run_pb2.RunRecord) -> Result:
        input_tokens, output_tokens = _usage(run)
        return Result(
            case,
            PATHS.get(run.path, "UNSPECIFIED"),
            run.reason,
            run.attempts,
            0.0,
            input_tokens,
            output_tokens,
        )
