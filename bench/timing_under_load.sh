#!/usr/bin/env bash
# The property and real-time tests, N times in a row under `pytest -n 2`, with a busy loop on
# the other core: the check that the suite is deterministic on a loaded machine (issue 31).
# Run by hand from the repository root, in the venv the tests use:
#   bash bench/timing_under_load.sh 20
# One line per run (exit code, time, pytest's summary) and the names of any failed tests.
# A test that fails here holds a fixed tolerance a busy machine can miss: give it a bound
# from the machine's own noise (gpubench_sdk.testing.noise_tolerance_ms) or a load-proof one.
set -uo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-20}
TESTS=(
  tests/test_report_svg.py tests/test_metrics_compare.py tests/test_metrics_stats.py
  tests/test_metrics_histogram.py tests/test_sse.py
  plugins/runpod/tests/test_runpod_local_server.py plugins/replicate/tests/test_cog_real_server.py
  plugins/openai/tests/test_openai_protocol.py plugins/openai/tests/test_openai_cli.py
  tests/test_testing_fleet.py tests/test_advise_concurrency.py tests/test_scenario_stages.py
  tests/test_monitor.py tests/test_noise_tolerance.py tests/test_bounded_waits.py
  plugins/huggingface/tests/test_huggingface_cli.py
  plugins/huggingface/tests/test_huggingface_protocol.py
)
python -c "while True: pass" &
BUSY=$!
trap 'kill $BUSY' EXIT
LOG=$(mktemp -d)
for i in $(seq "$RUNS"); do
  start=$(date +%s)
  python -m pytest -q -p no:cacheprovider -n 2 "${TESTS[@]}" >"$LOG/run_$i.log" 2>&1
  rc=$?
  echo "run $i rc=$rc $(($(date +%s) - start))s $(tail -1 "$LOG/run_$i.log")"
  grep "^FAILED" "$LOG/run_$i.log"
done
echo "logs in $LOG"
