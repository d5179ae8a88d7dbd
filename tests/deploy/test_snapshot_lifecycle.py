"""The S3 lifecycle rule for context snapshots (deploy/s3/snapshot-lifecycle.json): accepted by
a real S3 API, and it expires exactly the service's snapshot keys after the configured days."""

from __future__ import annotations

import json
import secrets
from typing import Any

import aioboto3

from nemo_context.snapshots.objects import LIFECYCLE_RULE_ID, SNAPSHOT_PREFIX, retention_rule
from nemo_testing.s3 import S3Endpoint
from tests.deploy.deploy_manifests import REPO, container_environment, pod_spec, rendered, the

LIFECYCLE = REPO / "deploy" / "s3" / "snapshot-lifecycle.json"


def _rule() -> dict[str, Any]:
    rules: list[dict[str, Any]] = json.loads(LIFECYCLE.read_text())["Rules"]
    assert len(rules) == 1
    return rules[0]


def test_the_rule_expires_the_services_snapshots_after_the_production_retention() -> None:
    resources = rendered("python", "prod")
    container = pod_spec(the(resources, "Deployment", "nemo-context"))["containers"][0]
    retention = container_environment(resources, container)["NEMO_CONTEXT_SNAPSHOT_RETENTION_DAYS"]
    rule = _rule()
    # Same id as the rule the context service maintains itself, so the two replace each other.
    assert rule["ID"] == LIFECYCLE_RULE_ID
    assert rule["Filter"] == {"Prefix": SNAPSHOT_PREFIX}
    assert rule["Status"] == "Enabled"
    assert rule["Expiration"] == {"Days": int(retention)}
    # And the very rule `nemo purge --apply-lifecycle-rule` writes: either may replace
    # the other without dropping the removal of replaced versions.
    assert rule == retention_rule(int(retention))


async def test_an_s3_api_accepts_the_rule(s3_endpoint: S3Endpoint) -> None:
    bucket = f"snapshots-{secrets.token_hex(4)}"
    session = aioboto3.Session(
        aws_access_key_id=s3_endpoint.access_key_id,
        aws_secret_access_key=s3_endpoint.secret_access_key,
        region_name=s3_endpoint.region,
    )
    async with session.client("s3", endpoint_url=s3_endpoint.url) as s3:
        await s3.create_bucket(Bucket=bucket)
        await s3.put_bucket_lifecycle_configuration(
            Bucket=bucket, LifecycleConfiguration=json.loads(LIFECYCLE.read_text())
        )
        stored = await s3.get_bucket_lifecycle_configuration(Bucket=bucket)
    assert [rule["ID"] for rule in stored["Rules"]] == [LIFECYCLE_RULE_ID]
    assert stored["Rules"][0]["Expiration"] == _rule()["Expiration"]
    assert stored["Rules"][0]["Filter"] == _rule()["Filter"]
