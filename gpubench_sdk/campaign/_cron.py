"""A five-field cron expression parser, and the times it fires between two instants.

The grammar is Vixie cron's (``man 5 crontab``), without the ``@hourly``-style nicknames:
``minute hour day-of-month month day-of-week``, each field a comma-separated list of ``*``,
``N``, ``A-B``, with an optional step ``/S`` after ``*``, ``N`` or ``A-B`` (``N/S`` means
``N-max/S``). Months and weekdays also accept English three-letter names (``jan``, ``mon``);
weekday 0 and 7 are both Sunday. As in Vixie cron, when both day-of-month and day-of-week are
restricted (neither starts with ``*``), a day matches if *either* matches.

Written here rather than taken from a dependency: it is ~150 lines and the scheduler needs only
"every firing time in [start, end)" in one time zone.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from .._base._errors import ConfigError

_FIELDS = (  # (name, low, high)
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day-of-month", 1, 31),
    ("month", 1, 12),
    ("day-of-week", 0, 7),
)
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


@dataclass(frozen=True, slots=True)
class CronExpression:
    """A parsed cron expression: the allowed values of each field (weekday 0 = Sunday)."""

    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days_of_month: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    dom_restricted: bool
    dow_restricted: bool

    def matches_day(self, day: dt.date) -> bool:
        if day.month not in self.months:
            return False
        dom = day.day in self.days_of_month
        dow = (day.isoweekday() % 7) in self.weekdays  # isoweekday: Mon=1..Sun=7 -> Sun=0
        if self.dom_restricted and self.dow_restricted:
            return dom or dow
        return dom and dow

    def times_ns(self, start_ns: int, end_ns: int, tz: ZoneInfo) -> list[int]:
        """Every firing time in ``[start_ns, end_ns)`` (epoch ns), reading the fields in ``tz``.

        A local time that does not exist (the hour skipped when clocks go forward) fires at the
        same offset after the change; one that occurs twice fires once (its first occurrence).
        """
        first = dt.datetime.fromtimestamp(start_ns / 1e9, tz).date()
        last = dt.datetime.fromtimestamp(end_ns / 1e9, tz).date()
        out: list[int] = []
        day = first
        while day <= last:
            if self.matches_day(day):
                for hour in sorted(self.hours):
                    for minute in sorted(self.minutes):
                        local = dt.datetime(day.year, day.month, day.day, hour, minute, tzinfo=tz)
                        t_ns = int(local.timestamp()) * 10**9
                        if start_ns <= t_ns < end_ns and (not out or t_ns > out[-1]):
                            out.append(t_ns)
            day += dt.timedelta(days=1)
        return out


def _number(text: str, field: str, low: int, high: int, names: tuple[str, ...]) -> int:
    key = text.strip().lower()
    if names and key in names:
        return names.index(key) + (1 if names is _MONTHS else 0)
    try:
        value = int(key)
    except ValueError:
        hint = f", or a name ({', '.join(names)})" if names else ""
        raise ConfigError(f"cron.{field}", text, f"an integer from {low} to {high}{hint}") from None
    if not low <= value <= high:
        raise ConfigError(f"cron.{field}", value, f"an integer from {low} to {high}")
    return value


def _field(text: str, field: str, low: int, high: int) -> frozenset[int]:
    names = _MONTHS if field == "month" else _WEEKDAYS if field == "day-of-week" else ()
    values: set[int] = set()
    for part in text.split(","):
        if not part:
            raise ConfigError(f"cron.{field}", text, "no empty item in a comma-separated list")
        base, slash, step_text = part.partition("/")
        step = 1
        if slash:
            try:
                step = int(step_text)
            except ValueError:
                step = 0
            if step < 1:
                raise ConfigError(f"cron.{field}", part, "a step after '/' that is an integer >= 1")
        if base == "*":
            lo, hi = low, high
        elif "-" in base:
            a, _, b = base.partition("-")
            lo, hi = _number(a, field, low, high, names), _number(b, field, low, high, names)
            if lo > hi:
                raise ConfigError(f"cron.{field}", part, f"a range A-B with A <= B ({lo} > {hi})")
        else:
            lo = _number(base, field, low, high, names)
            hi = high if slash else lo  # "5/15" is "5-max/15", as in Vixie cron
        values.update(range(lo, hi + 1, step))
    if field == "day-of-week" and 7 in values:  # 7 is Sunday too
        values.discard(7)
        values.add(0)
    return frozenset(values)


def parse_cron(text: str) -> CronExpression:
    """Parse a five-field cron expression; a ``ConfigError`` names the field that is wrong."""
    parts = text.split()
    if len(parts) != 5:
        raise ConfigError(
            "cron",
            text,
            "five fields separated by spaces: minute hour day-of-month month day-of-week "
            '(e.g. "0 */4 * * *" for every 4 hours on the hour)',
        )
    sets = [_field(p, name, lo, hi) for p, (name, lo, hi) in zip(parts, _FIELDS, strict=True)]
    return CronExpression(
        text=" ".join(parts),
        minutes=sets[0],
        hours=sets[1],
        days_of_month=sets[2],
        months=sets[3],
        weekdays=sets[4],
        dom_restricted=not parts[2].startswith("*"),
        dow_restricted=not parts[4].startswith("*"),
    )
