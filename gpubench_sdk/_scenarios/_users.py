"""``users``: concurrent chat users, each holding conversations of several turns.

A chat user does not send independent requests: they send a turn, read the answer, think,
and send the next turn of the same conversation with its history. This shape keeps ``users``
such users per target for ``duration_s``: each one starts a session, sends its turns in order
(each after the previous answer and ``think_s``), then starts the next session. How many turns
a session has is the workload's (``Load.turns``: the ``chat`` workload's ``turns``); request
``seq`` is turn ``seq % turns`` of session ``seq // turns``, so each turn is stored with its
session and turn, and a report can show latency growing with the context.

Written on the public ``Load`` API only: ``send`` for each turn, a user per task.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import anyio

from ._base import MAX_CONCURRENCY, Count, Scenario, check_count, check_seconds
from ._load import share

if TYPE_CHECKING:
    from ._load import Load


@dataclass(frozen=True, slots=True)
class Users(Scenario):
    """``users`` concurrent users per target for ``duration_s``, each sending the turns of one
    session after another, ``think_s`` after each answer before the next turn. A session under
    way at the end is left unfinished (its turns sent so far are stored)."""

    kind: ClassVar[str] = "users"
    users: Count
    duration_s: float
    think_s: float = 0.0
    deadline_s: float | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        check_count("users.users", self.users, 1, MAX_CONCURRENCY)
        check_seconds("users.duration_s", self.duration_s)
        check_seconds("users.think_s", self.think_s, zero_ok=True)
        self.check_label()

    def planned(self, targets: int) -> int:
        """An estimate: one request per user per second of thinking (or per second)."""
        return max(1, math.ceil(self.duration_s / max(self.think_s, 1.0) * self.users)) * targets

    def inflight(self) -> int:
        return self.users

    def inflight_field(self) -> str:
        return "users"

    async def drive(self, load: Load) -> None:
        await load.sync()  # every process starts together, as the loops do
        mine, m = share(load.shard, load.shards, self.users)
        if not mine:
            return  # more processes than users: this one has none
        until = time.monotonic() + self.duration_s
        async with anyio.create_task_group() as tg:
            for target in load.targets:
                sessions = itertools.count(load.shard, m)  # this process's session numbers
                for _ in range(mine):
                    tg.start_soon(self._user, load, target, sessions, until)

    async def _user(self, load: Load, target: str, sessions: Iterator[int], until: float) -> None:
        turns = load.turns
        while time.monotonic() < until and not load.stopped(target):
            first = next(sessions) * turns
            for turn in range(turns):
                if turn and self.think_s:
                    await anyio.sleep(self.think_s)
                if time.monotonic() >= until or not await load.send(target, first + turn):
                    return
