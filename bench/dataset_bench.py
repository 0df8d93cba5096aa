"""Sampling prompts from a large dataset file: peak memory and time of gpubench's streamed
reservoir sample against loading the file whole, as the common serving benchmarks read
ShareGPT (``json.load`` of the file, then a sample of the list).

    python bench/dataset_bench.py --size-mb 1024            # a 1 GB ShareGPT-style JSON array
    python bench/dataset_bench.py --size-mb 1024 --jsonl    # the same records as JSON lines

Each reader runs in a fresh interpreter, so its peak RSS (``ru_maxrss``) is its own. The file
is written once under --dir (default: a temporary folder) and removed afterwards unless --keep.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpubench_sdk._contract._workload import _VOCABULARY  # the llm workload's own words

OURS = """
import resource, sys, time
from gpubench_sdk._contract._dataset import DatasetOptions, load_sample
t = time.perf_counter()
s = load_sample(DatasetOptions(path=sys.argv[1], format="sharegpt", sample=1000), 0)
print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, s.scanned)
"""

# The whole file in memory, then a sample: what a reader built on json.load does.
WHOLE = """
import json, random, resource, sys, time
t = time.perf_counter()
with open(sys.argv[1], encoding="utf-8") as fp:
    if sys.argv[1].endswith(".jsonl"):
        data = [json.loads(line) for line in fp]
    else:
        data = json.load(fp)
chats = [c for c in data if c["conversations"] and c["conversations"][0]["from"] == "human"]
sample = random.Random(0).sample(chats, 1000)
print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, len(data))
"""


def write(path: Path, size_mb: int, jsonl: bool) -> int:
    rng = random.Random(1)
    target = size_mb << 20
    written = count = 0
    with path.open("w", encoding="utf-8") as fp:
        if not jsonl:
            fp.write("[\n")
        while written < target:
            q = " ".join(rng.choices(_VOCABULARY, k=rng.randint(5, 400)))
            a = " ".join(rng.choices(_VOCABULARY, k=rng.randint(5, 800)))
            rec = {"id": f"c{count}", "conversations": [{"from": "human", "value": q},
                                                        {"from": "gpt", "value": a}]}  # fmt: skip
            text = json.dumps(rec)
            sep = "\n" if jsonl else (",\n" if count else "")
            fp.write(sep + text if not jsonl else text + "\n")
            written += len(text) + 2
            count += 1
        if not jsonl:
            fp.write("\n]\n")
    return count


def run(script: str, path: Path) -> tuple[float, float, int]:
    out = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True,
                         text=True, check=True).stdout.split()  # fmt: skip
    return float(out[0]), int(out[1]) / 1024, int(out[2])  # seconds, MiB, records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--jsonl", action="store_true", help="JSON lines instead of an array")
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--skip-whole", action="store_true", help="only gpubench's reader")
    args = parser.parse_args()
    folder = Path(args.dir or tempfile.mkdtemp(prefix="gpubench-dataset-"))
    path = folder / ("chats.jsonl" if args.jsonl else "chats.json")
    t = time.perf_counter()
    records = write(path, args.size_mb, args.jsonl)
    size = path.stat().st_size / (1 << 20)
    print(f"wrote {path} ({size:,.0f} MiB, {records:,} chats) in {time.perf_counter() - t:.0f} s")
    try:
        rows = [("gpubench (streamed reservoir)", *run(OURS, path))]
        if not args.skip_whole:
            rows.append(("whole file (json.load, then sample)", *run(WHOLE, path)))
        print(f"{'reader':38} {'seconds':>8} {'peak RSS MiB':>13} {'records':>10}")
        for name, seconds, rss, n in rows:
            print(f"{name:38} {seconds:8.1f} {rss:13,.0f} {n:10,}")
        if len(rows) == 2:
            print(f"memory: gpubench {rows[0][2] / rows[1][2]:.3f}x the whole-file reader's; "
                  f"time {rows[0][1] / rows[1][1]:.2f}x")  # fmt: skip
    finally:
        if not args.keep:
            path.unlink()


if __name__ == "__main__":
    main()
