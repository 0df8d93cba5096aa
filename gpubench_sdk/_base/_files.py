"""Writing an output file so that a failed or interrupted write leaves the old one whole.

Every file gpubench writes (a report, an advice page, an export) is written to a temporary
file beside it and renamed over it once complete: a rename within one directory is atomic
(POSIX ``rename(2)``, Windows ``MoveFileEx`` with replace, which ``os.replace`` uses), so a
reader sees the old file or the new one, never half of either, and a full disk or a kill
mid-write costs nothing but the temporary file.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

PART_SUFFIX = ".part"  # what a write killed mid-way leaves beside its target


@contextlib.contextmanager
def replacing(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A fresh temporary path beside ``path`` for the block to write the new content to;
    flushed to disk and renamed over ``path`` when the block ends, removed if it raises."""
    target = Path(path)
    part = target.with_name(f".{target.name}.{secrets.token_hex(4)}{PART_SUFFIX}")
    # O_EXCL: never another's file; 0o666 under the umask: the mode a plain open() gives
    os.close(os.open(part, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
    try:
        yield part
        with open(part, "rb+") as written:  # the rename must not outrun the data (ext4, xfs)
            os.fsync(written.fileno())
        os.replace(part, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            part.unlink()
        if isinstance(exc, OSError) and exc.filename == os.fspath(part):
            # the user named the target, not our temporary file: say it of theirs
            raise OSError(exc.errno, exc.strerror, os.fspath(target)) from exc
        raise


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """``Path(path).write_text(text)`` (UTF-8), all or nothing."""
    with replacing(path) as part:
        part.write_text(text, encoding="utf-8")


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether two paths name one file: the same resolved path (whether or not it exists
    yet), or, for two existing paths, the same inode (a hard link, a bind mount)."""
    if Path(a).resolve() == Path(b).resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist
        return False
