"""GetSnapshot: an auditor reads back exactly what a model or an agent saw, verified."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable

import grpc
from botocore.exceptions import BotoCoreError, ClientError
from google.protobuf import json_format

from nemo_context.errors import service_error
from nemo_context.gate import Gated, gate
from nemo_context.snapshots.names import current_names
from nemo_context.snapshots.objects import KEY_PATTERN
from nemo_context.snapshots.store import (
    CONVERSATION_KIND,
    SnapshotDigestMismatchError,
    SnapshotNotFoundError,
    SnapshotStore,
)
from nemo_protos.context.v1 import context_service_pb2 as pb
from nemo_protos.context.v1.error_reason_pb2 import ErrorReason

logger = logging.getLogger(__name__)


async def _never_erased(_learner_ref: str) -> bool:
    return False


async def read_snapshot(
    store: SnapshotStore,
    input_ref: str,
    erased_ref: Callable[[str], Awaitable[bool]] = _never_erased,
) -> Gated[pb.GetSnapshotResponse]:
    """The snapshot under ``input_ref`` after its digest was verified.

    Errors: INVALID_ARGUMENT / ``INVALID_INPUT_REF`` for anything not shaped like a snapshot key,
    NOT_FOUND / ``SNAPSHOT_ERASED`` when the learner it was about was erased (``erased_ref`` says
    so of its ref), NOT_FOUND / ``SNAPSHOT_NOT_FOUND`` when nothing is recorded or the object has
    expired,
    DATA_LOSS / ``SNAPSHOT_DIGEST_MISMATCH`` when the stored bytes were altered after writing,
    UNAVAILABLE / ``SNAPSHOT_STORE_UNAVAILABLE`` when the object storage cannot be read.
    """
    if not KEY_PATTERN.match(input_ref):
        raise service_error(
            grpc.StatusCode.INVALID_ARGUMENT,
            ErrorReason.INVALID_INPUT_REF,
            "input_ref must be a snapshot key: ai-context/YYYY-MM-DD/<learner_ref>/<uuid>.json",
        )
    try:
        snapshot = await store.get(input_ref)
    except SnapshotNotFoundError:
        if await erased_ref(input_ref.split("/")[2]):
            raise service_error(
                grpc.StatusCode.NOT_FOUND,
                ErrorReason.SNAPSHOT_ERASED,
                "the learner this snapshot was about was erased; its data key is destroyed",
            ) from None
        raise service_error(
            grpc.StatusCode.NOT_FOUND,
            ErrorReason.SNAPSHOT_NOT_FOUND,
            "no snapshot is stored under input_ref",
        ) from None
    except (BotoCoreError, ClientError, OSError) as error:
        logger.warning("snapshot storage read failed", extra={"error_type": type(error).__name__})
        raise service_error(
            grpc.StatusCode.UNAVAILABLE,
            ErrorReason.SNAPSHOT_STORE_UNAVAILABLE,
            "the snapshot storage cannot be read right now",
        ) from None
    except SnapshotDigestMismatchError:
        raise service_error(
            grpc.StatusCode.DATA_LOSS,
            ErrorReason.SNAPSHOT_DIGEST_MISMATCH,
            "the stored snapshot does not match the digest recorded when it was written",
        ) from None
    response = pb.GetSnapshotResponse(
        input_ref=snapshot.input_ref,
        sha256=snapshot.sha256,
        canonical_json=snapshot.canonical_json,
    )
    # Parsed back as what it was written from: a conversation snapshot is no ContextBundle.
    bundle = response.conversation_bundle if snapshot.kind == CONVERSATION_KIND else response.bundle
    document = current_names(json.loads(snapshot.canonical_json), bundle.DESCRIPTOR)
    json_format.ParseDict(document, bundle)
    # The learner's id cannot be recovered from a pseudonym, so only field names are checked
    # here; the bytes are the ones that passed the full gate when the bundle was built.
    return gate(response, forbidden_values=())
