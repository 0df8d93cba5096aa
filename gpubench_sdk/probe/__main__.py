"""``python -m gpubench_sdk.probe``: run the probe here and print its JSON result."""

from __future__ import annotations

import argparse
import json
import sys

from ._probe import BACKENDS, PHASES, ProbeOptions, run_probe


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gpubench_sdk.probe",
        description="Measure matmul TFLOP/s per dtype, memory and host<->device bandwidth, "
        "launch overhead and CUDA start-up on this machine; print JSON.",
    )
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats")
    parser.add_argument("--backend", choices=BACKENDS, default="auto")
    parser.add_argument(
        "--phases", default=",".join(PHASES), help=f"comma-separated subset of {','.join(PHASES)}"
    )
    parser.add_argument("--dtypes", default="", help="comma-separated, e.g. bf16,fp8")
    parser.add_argument("--matmul-n", type=int, default=None, help="matrix side")
    parser.add_argument("--indent", type=int, default=2)
    args = parser.parse_args(argv)
    options = ProbeOptions(
        quick=args.quick,
        backend=args.backend,
        phases=tuple(p for p in args.phases.split(",") if p),
        dtypes=tuple(d for d in args.dtypes.split(",") if d),
        matmul_n=args.matmul_n,
    )
    json.dump(run_probe(options), sys.stdout, indent=args.indent or None)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
