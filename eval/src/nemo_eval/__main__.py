"""``python -m nemo_eval`` (``make eval``): every prompt over the fixed input set against the
configured provider, the local model by default.

Writes ``.nemo/eval/<label>.json`` and ``.nemo/eval/<label>.png``, prints the table, and exits 1
when any run broke an invariant (:mod:`nemo_eval.metrics`). The label is ``NEMO_EVAL_LABEL``, or
the provider's name. ``python -m nemo_eval compare A.json B.json`` puts two reports side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from nemo_eval import metrics, report
from nemo_eval.cases import CASES
from nemo_eval.runner import Result, Runner
from nemo_eval.stack import eval_stack, provider_choice
from nemo_ops import local_model


def _progress(message: str) -> None:
    print(f"nemo eval: {message}", file=sys.stderr, flush=True)


async def evaluate(out_dir: Path, label: str) -> int:
    """Run every case and write the reports; returns the exit code. ``out_dir`` exists."""
    choice = provider_choice(os.environ)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="work-", dir=out_dir) as work:
        async with eval_stack(Path(work), choice, _progress) as stack:
            runner = Runner(stack)
            results: list[Result] = []
            for number, case in enumerate(CASES, start=1):
                result = await runner.run(case)
                results.append(result)
                _progress(
                    f"[{number}/{len(CASES)}] {case.prompt_id} {case.label}: {result.path}"
                    f"{'/' + result.reason if result.reason else ''} in {result.seconds:.1f} s"
                )
            rules = metrics.guardrail_rules(stack.gateway_log)
            settings = stack.settings
    reports = metrics.summarise(results, rules)
    broken = metrics.violations(results)
    default_model = local_model.MODEL_NAME if choice.provider == "local" else "(the gateway's)"
    meta = {
        "label": label,
        "provider": choice.provider,
        "model_fast": os.environ.get("NEMO_GATEWAY_MODEL_FAST", default_model),
        "model_strong": os.environ.get("NEMO_GATEWAY_MODEL_STRONG", default_model),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "seconds": round(time.monotonic() - started, 1),
        "cases": len(CASES),
        "gateway_settings": settings,
    }
    json_path, png_path = out_dir / f"{label}.json", out_dir / f"{label}.png"
    report.write_json(json_path, meta, reports, broken)
    report.write_chart(png_path, f"Paths per prompt: {label} ({choice.provider})", reports)
    print(report.table(reports))
    print(f"\nreport: {json_path}\nchart:  {png_path}")
    if broken:
        print(f"\n{len(broken)} invariant violations:", file=sys.stderr)
        for violation in broken:
            print(
                f"  {violation.invariant}: {violation.prompt_id} ({violation.case}): "
                f"{violation.detail}",
                file=sys.stderr,
            )
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nemo_eval", description=__doc__)
    parser.add_argument("--out", type=Path, default=Path(".nemo/eval"), help="default: .nemo/eval")
    commands = parser.add_subparsers(dest="command")
    compared = commands.add_parser("compare", help="two reports side by side")
    compared.add_argument("first", type=Path)
    compared.add_argument("second", type=Path)
    args = parser.parse_args(argv)
    if args.command == "compare":
        print(report.compare(args.first, args.second))
        return 0
    label = os.environ.get("NEMO_EVAL_LABEL") or provider_choice(os.environ).provider
    out_dir: Path = args.out.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    return asyncio.run(evaluate(out_dir, label))


if __name__ == "__main__":
    sys.exit(main())
