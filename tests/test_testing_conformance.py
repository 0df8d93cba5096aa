"""The conformance suite passes a correct provider and catches broken ones.

It runs in a child pytest (the suite is itself a set of tests) on ``tests/conformance_toy``:
a toy protocol whose emulator and provider are written as the plugin guide says, and five
providers broken on purpose: two leak their key in a log line (as is, and base64-encoded in a
Basic credential), one maps 429 to a 5xx, one reports a queue time the server did not, one
reads ``Retry-After`` as a number only (an HTTP date lost).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

TOY = Path(__file__).parent / "conformance_toy"
PYTEST = (sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", "-q")


@pytest.mark.slow
def test_the_suite_passes_a_good_provider_and_fails_broken_ones() -> None:
    selection = (
        "TestToy or (TestLeaky and leaks) or (TestBase64Leaky and leaks)"
        " or (TestThrottleAs5xx and fault_is_mapped) or (TestLyingTimings and timings)"
        " or (TestFloatRetryAfter and fault_is_mapped and throttle)"
    )
    done = subprocess.run(
        [*PYTEST, "--rootdir", str(TOY), "-k", selection, str(TOY / "suite_toy.py")],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=TOY,
    )
    outcomes = dict(
        (m.group(2).split("::", 1)[1], m.group(1))
        for m in re.finditer(r"^(PASSED|FAILED|SKIPPED|ERROR) (\S+::\S+)", done.stdout, re.M)
    )
    good = {name: o for name, o in outcomes.items() if name.startswith("TestToy::")}
    assert len(good) >= 14, done.stdout[-3000:]
    assert set(good.values()) <= {"PASSED", "SKIPPED"}, good
    assert good["TestToy::test_timings_are_consistent"] == "PASSED"
    assert good["TestToy::test_cold_start_detection"] == "PASSED"
    assert outcomes["TestLeaky::test_api_key_never_leaks"] == "FAILED"
    assert outcomes["TestBase64Leaky::test_api_key_never_leaks"] == "FAILED"
    throttles = {n: o for n, o in outcomes.items() if n.startswith("TestThrottleAs5xx::")}
    assert throttles["TestThrottleAs5xx::test_fault_is_mapped[throttle]"] == "FAILED"
    assert throttles["TestThrottleAs5xx::test_fault_is_mapped[throttle_retry_after]"] == "FAILED"
    assert throttles["TestThrottleAs5xx::test_fault_is_mapped[server_error_500]"] == "PASSED"
    assert outcomes["TestLyingTimings::test_timings_are_consistent"] == "FAILED"
    floats = {n.split("[")[1]: o for n, o in outcomes.items() if n.startswith("TestFloatRe")}
    assert floats == {
        "throttle]": "PASSED",
        "throttle_retry_after]": "PASSED",
        "throttle_retry_after_date]": "FAILED",
    }, floats
