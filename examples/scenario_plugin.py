"""A third-party scenario kind in a few lines: ``pulses``, ``size`` requests at once every
``every_s`` seconds (a cron-like thundering herd), for ``pulses`` times.

Register it in your package's ``pyproject.toml`` and a plan can use ``kind = "pulses"``::

    [project.entry-points."gpubench.scenarios"]
    pulses = "my_package.shapes:Pulses"

Run this file to drive it from Python against a local echo endpoint (no plugin install needed):
``python examples/scenario_plugin.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from gpubench_sdk import ConfigError, Load, Scenario


@dataclass(frozen=True)
class Pulses(Scenario):
    kind: ClassVar[str] = "pulses"
    pulses: int
    every_s: float
    size: int = 5
    name: str | None = None  # every kind has these two: a label and an optional deadline
    deadline_s: float | None = None

    def __post_init__(self) -> None:  # errors name "<kind>.<field>"; the plan adds its place
        if self.pulses < 1:
            raise ConfigError("pulses.pulses", self.pulses, "an integer >= 1")
        if not 0 < self.every_s <= 3600:
            raise ConfigError("pulses.every_s", self.every_s, "seconds > 0, at most 3600")

    def planned(self, targets: int) -> int:  # for progress bars
        return self.pulses * self.size * targets

    def inflight(self) -> int:  # for the open-files check
        return self.size

    async def drive(self, load: Load) -> None:  # the runner's send path, sharded for you
        await load.open_loop(p * self.every_s for p in range(self.pulses) for _ in range(self.size))


if __name__ == "__main__":
    import sys
    import tempfile
    from pathlib import Path

    import anyio

    from gpubench_sdk import EchoProbe, LocalProvider, Store, run

    async def main() -> None:
        out = Path(tempfile.mkdtemp()) / "pulses.sqlite"
        result = await run(
            {"local": LocalProvider(max_workers=2)},
            EchoProbe(sleep_ms=10),
            [Pulses(pulses=3, every_s=0.5, size=4)],
            store=out,
        )
        with Store(out) as store:
            invs = store.invocations(result.run_id)
        ok = sum(i.ok for i in invs)
        print(f"pulses: {ok}/{len(invs)} ok, status {result.status}")
        sys.exit(0 if result.status == "completed" and ok == len(invs) == 12 else 1)

    anyio.run(main)
