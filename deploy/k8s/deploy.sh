#!/usr/bin/env bash
# Deploy one overlay in order, with plain kubectl:
#   1. the namespace, the baseline network policies and the migration Job (the objects labelled
#      nemo-ai-plane/deploy-phase=migrate), then wait until the Job has migrated the database;
#   2. everything else, and wait for the rollouts.
# The services therefore never start against an older schema.
# Usage: deploy.sh dev|dev-local-model|prod
set -euo pipefail

PHASE_SELECTOR="nemo-ai-plane/deploy-phase=migrate"
MIGRATION_JOB="nemo-migrate"
DEPLOYMENTS=(nemo-context nemo-gateway nemo-toolplane nemo-console)
MIGRATION_TIMEOUT_SECONDS=900

usage() {
  echo "usage: $0 dev|dev-local-model|prod" >&2
  exit 2
}

[[ $# -eq 1 ]] || usage
overlay="$(cd "$(dirname "$0")" && pwd)/overlays/$1"
[[ -f "$overlay/kustomization.yaml" ]] || usage
namespace="$(sed -n 's/^namespace: *//p' "$overlay/kustomization.yaml")"
# An overlay with the local-model component waits for the model server too (the gateway's
# first answers need it).
if grep -q "components/local-model" "$overlay/kustomization.yaml"; then
  DEPLOYMENTS=(nemo-local-model "${DEPLOYMENTS[@]}")
fi
# An overlay with the pgbouncer component waits for the pooler too (the services' statements
# go through it).
if grep -q "components/pgbouncer" "$overlay/kustomization.yaml"; then
  DEPLOYMENTS=(nemo-pgbouncer "${DEPLOYMENTS[@]}")
fi

# A Job's pod template cannot change, and each release must migrate with its own image: the
# previous run's Job goes first (its logs go with it).
kubectl delete job "$MIGRATION_JOB" --namespace "$namespace" --ignore-not-found --wait=true

echo "deploy: phase 1, migration ($namespace)" >&2
kubectl apply -k "$overlay" --selector "$PHASE_SELECTOR"

deadline=$((SECONDS + MIGRATION_TIMEOUT_SECONDS))
while true; do
  complete="$(kubectl get job "$MIGRATION_JOB" --namespace "$namespace" \
    -o jsonpath='{.status.conditions[?(@.type=="Complete")].status}')"
  failed="$(kubectl get job "$MIGRATION_JOB" --namespace "$namespace" \
    -o jsonpath='{.status.conditions[?(@.type=="Failed")].status}')"
  if [[ "$complete" == "True" ]]; then
    break
  fi
  if [[ "$failed" == "True" || $SECONDS -ge $deadline ]]; then
    echo "deploy: the migration did not complete; nothing else was changed" >&2
    kubectl logs "job/$MIGRATION_JOB" --namespace "$namespace" --all-containers --tail=50 >&2 || true
    exit 1
  fi
  sleep 5
done
kubectl logs "job/$MIGRATION_JOB" --namespace "$namespace" --all-containers >&2

echo "deploy: phase 2, services ($namespace)" >&2
kubectl apply -k "$overlay"
for deployment in "${DEPLOYMENTS[@]}"; do
  kubectl rollout status "deployment/$deployment" --namespace "$namespace" --timeout=10m
done
echo "deploy: done" >&2
