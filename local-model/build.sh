#!/usr/bin/env bash
# Build the local model server's environment (local-model/.venv) from local-model/uv.lock.
# The first build compiles llama.cpp (about 10 minutes on 2 cores); uv keeps the built wheel in
# its cache, so later builds, in this clone or any other on the machine, take seconds. Progress
# goes to stdout, the whole build output to the log named by $1.
set -euo pipefail
uv="$1"
log="$2"
mkdir -p "$(dirname "$log")"
echo "local model: syncing local-model/.venv (the full output goes to $log)"
"$uv" sync --frozen --project "$(dirname "$0")" -v >"$log" 2>&1 &
build=$!
shown=-10
started=$SECONDS
while kill -0 "$build" 2>/dev/null; do
  sleep 1
  step=$(grep -oE '\[[0-9]+/[0-9]+\]' "$log" | tail -1 | tr -d '[]' || true)
  if [[ -n "$step" ]]; then
    percent=$(( 100 * ${step%/*} / ${step#*/} ))
    if (( percent >= shown + 10 )); then
      echo "local model: compiling llama.cpp, ${percent}% (step $step, $(( SECONDS - started )) s)"
      shown=$percent
    fi
  fi
done
if ! wait "$build"; then
  echo "local model: the build failed; the end of $log:" >&2
  tail -n 30 "$log" >&2
  exit 1
fi
echo "local model: ready ($(( SECONDS - started )) s)"
