"""What every command shares: the consoles, exit codes, error printing, the store's location.

Exit codes (the same table is in ``gpubench --help`` and docs/cli.md)::

    0    every threshold held
    1    a threshold failed (by default: a target whose every measured request failed)
    2    configuration or usage error: a bad plan or option, an unknown plugin, a store or
         run that cannot be read
    130  interrupted (Ctrl-C): what was measured is kept, and the output says where
"""

from __future__ import annotations

import contextlib
import enum
import errno
import math
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click
from rich.console import Console
from rich.markup import escape

from .._base._errors import CapabilityError, ConfigError, GpubenchError, PluginError, StoreError
from .._base._files import same_file
from .._base._secrets import redact
from .._runner._results import sole_exception

F = TypeVar("F", bound=Callable[..., Any])


class FiniteRange(click.FloatRange):
    """click's FloatRange, refusing nan and inf: float() reads both, and no range check
    catches nan (every comparison with it is false), so `--cold-s inf` once priced a day."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


class FiniteFloat(click.types.FloatParamType):
    """A float option with no range: finite (see FiniteRange)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


FINITE = FiniteFloat()


def _stdout_to_devnull() -> None:
    """Point stdout at /dev/null, so no later write or the interpreter's last flush fails."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


class _Stdout(Console):
    """rich's console, but a reader that left (``| head``) raises BrokenPipeError for the
    command to handle (rich itself would exit 1, hiding the verdict the command computed)."""

    def on_broken_pipe(self) -> None:
        self.quiet = True  # nothing more to print
        _stdout_to_devnull()
        raise BrokenPipeError


# Wide when captured (pipes, CI logs): rich would otherwise squeeze tables into 80 columns.
out = _Stdout(width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True)


class ExitCode(enum.IntEnum):
    OK = 0
    THRESHOLD_FAILED = 1
    USAGE = 2
    INTERRUPTED = 130


EXIT_CODES_HELP = (
    "\b\nExit codes:\n"
    "  0    every threshold held\n"
    "  1    a threshold failed (by default: a target whose every measured request failed)\n"
    "  2    configuration or usage error (bad plan or option, unknown plugin, unreadable store)\n"
    "  130  interrupted: the requests measured so far are kept"
)

# The store: --store, else $GPUBENCH_STORE, else the plan's run.output (run), else this.
DEFAULT_STORE = "gpubench.sqlite"
STORE_ENV = "GPUBENCH_STORE"


def resolve_store(given: str | None, plan_output: str | None = None) -> str:
    """The one rule every command uses to find the results store."""
    return given or os.environ.get(STORE_ENV) or plan_output or DEFAULT_STORE


def existing_store(given: str | None) -> str:
    """The store by the rule, which must exist: reading commands never create one."""
    path = resolve_store(given)
    if not Path(path).is_file():
        raise ConfigError(
            "--store",
            path,
            f"an existing results store: a run writes one (gpubench run PLAN --store FILE); "
            f"name it with --store or ${STORE_ENV}",
        )
    return path


def writable_path(path: str, option: str, *, reads: Mapping[str, str | None] | None = None) -> None:
    """Refuse, before any work, an output path that cannot be a file (checked, not guessed)
    or that names a file the command reads (``reads``: option -> path, e.g. the store): the
    output is written over its target, which would lose every run in a store."""
    for read_option, read_path in (reads or {}).items():
        if read_path is not None and same_file(path, read_path):
            raise ConfigError(
                option,
                path,
                f"a file other than the one {read_option} reads ({read_path}): writing it "
                f"would replace what this command reads; name a new file (e.g. report.html)",
            )
    target = Path(path)
    parent = target.parent
    if target.is_dir():
        raise ConfigError(option, path, "a file name, not a directory (e.g. report.html)")
    for above in (parent, *parent.parents):
        if above.exists():
            if not above.is_dir():
                raise ConfigError(option, path, f"a path in a directory: {above} is a regular file")
            break
    if not parent.exists():
        raise ConfigError(option, path, f"a path in an existing directory (mkdir -p {parent})")


@contextlib.contextmanager
def as_flags(names: Mapping[str, str]) -> Iterator[None]:
    """Name the flag the user typed, not the model field behind it, in a refusal: a
    ``ConfigError`` for ``traffic.rate_per_s`` (or ``replay.path (trace.csv:3)``) raised under
    ``{"traffic.rate_per_s": "--rate"}`` is re-raised for ``--rate``; ``"*.field"`` names a
    field under any one owner (``fast.rate_usd_per_s`` -> ``--price (fast)``). A decorator
    too, put innermost (just above the command's ``def``)."""
    try:
        yield
    except ConfigError as exc:
        for field, flag in names.items():
            if field.startswith("*."):  # "*.rate_usd_per_s": fast.rate_usd_per_s, per target
                owner, dot, last = exc.field.rpartition(".")
                if dot and owner and last == field[2:]:
                    raise ConfigError(f"{flag} ({owner})", exc.value, exc.expected) from exc
                continue
            rest = exc.field[len(field) :]
            if exc.field.startswith(field) and rest[:1] in ("", " ", ".", "["):
                raise ConfigError(flag + rest, exc.value, exc.expected) from exc
        raise


def store_option(f: F) -> F:
    return click.option(
        "--store",
        "store_path",
        default=None,
        metavar="FILE",
        type=click.Path(dir_okay=False),
        help=f"results store (SQLite file); default: ${STORE_ENV}, else {DEFAULT_STORE}",
    )(f)


def error(message: str) -> None:
    """One ``error:`` line on stderr, secrets masked, never wrapped mid-word into markup."""
    err.print(f"[bold red]error:[/] {escape(redact(message))}", highlight=False, soft_wrap=True)


def warn(message: str) -> None:
    err.print(f"[yellow]warning:[/] {escape(message)}", highlight=False, soft_wrap=True)


def fail(exc: BaseException) -> NoReturn:
    """Print ``exc`` as a person reads it and exit with its code; bugs say they are bugs."""
    if isinstance(exc, BaseExceptionGroup):
        exc = sole_exception(exc)
    if isinstance(exc, KeyboardInterrupt):
        error("interrupted")
        sys.exit(ExitCode.INTERRUPTED)
    if isinstance(exc, GpubenchError):
        error(str(exc))
        usage = isinstance(exc, ConfigError | PluginError | CapabilityError | StoreError)
        sys.exit(ExitCode.USAGE if usage else 1)
    if isinstance(exc, OSError) and exc.errno == errno.EMFILE:
        import resource  # POSIX; EMFILE is too

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        error(
            f"too many open files: the open-files limit is {soft} (hard {hard}); lower the "
            "plan's concurrency or raise the limit (ulimit -n)"
        )
        sys.exit(ExitCode.USAGE)
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        if exc.filename is None:  # stdout: its last flush at exit would fail the same way
            _stdout_to_devnull()
            error(f"stdout: {exc.strerror or exc}: the output is incomplete")
        else:  # written through _files.replacing: the old file is whole
            error(f"{exc.filename}: {exc.strerror or exc}: left as it was; free space, run again")
        sys.exit(ExitCode.USAGE)
    if isinstance(exc, OSError) and exc.filename is not None:
        # a file we were told to read or write: the user's to fix (a missing directory, a
        # path under a regular file, no permission)
        error(f"{exc.filename}: {exc.strerror or exc}")
        sys.exit(ExitCode.USAGE)
    if os.environ.get("GPUBENCH_DEBUG"):
        raise exc
    message = redact(f"{type(exc).__name__}: {exc}")
    err.print(
        f"[bold red]internal error:[/] {escape(message)} (GPUBENCH_DEBUG=1 shows where)",
        highlight=False,
        soft_wrap=True,
    )
    sys.exit(1)


def quiet_broken_pipe() -> NoReturn:
    """The reader of our output left (``| head``): stop quietly, as ripgrep does (exit 0)."""
    _stdout_to_devnull()
    os._exit(ExitCode.OK)  # no atexit flush of a pipe nobody reads


@contextlib.contextmanager
def stdout_may_close() -> Iterator[None]:
    """Printing a verdict's details: if the reader leaves (``| head``), stop printing but
    keep going, so the exit code still says whether the thresholds held."""
    try:
        yield
    except BrokenPipeError:
        _stdout_to_devnull()


def usage_error(exc: click.ClickException) -> NoReturn:
    """A command line click refused, as one line: what is wrong, and where the help is."""
    if isinstance(exc, click.exceptions.NoArgsIsHelpError):
        exc.show()  # a group called bare: its help is the answer
        sys.exit(ExitCode.USAGE)
    ctx = getattr(exc, "ctx", None)
    where = f" (see: {ctx.command_path} --help)" if ctx is not None else ""
    error(" ".join(exc.format_message().split()) + where)
    sys.exit(ExitCode.USAGE if isinstance(exc, click.UsageError) else exc.exit_code)


class Group(click.Group):
    """Every command's errors end here: a clear line on stderr and an exit code, never a key."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """click's, but a refused command line is one ``error:`` line (exit 2), not a page."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, **extra)
        except click.ClickException as exc:
            usage_error(exc)
        except (click.Abort, KeyboardInterrupt):
            err.print("interrupted", highlight=False)
            sys.exit(ExitCode.INTERRUPTED)
        sys.exit(code if isinstance(code, int) else ExitCode.OK)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort, SystemExit):
            raise
        except BrokenPipeError:
            quiet_broken_pipe()
        except KeyboardInterrupt:
            # a second Ctrl-C (the first stops a run gracefully): what was committed is kept
            err.print("interrupted", highlight=False)
            sys.exit(ExitCode.INTERRUPTED)
        except Exception as exc:
            fail(exc)


def json_safe(value: Any) -> Any:
    """NaN (an undefined figure) as JSON null: strict JSON parsers reject NaN."""
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value
