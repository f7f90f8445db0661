"""Files the user names: read whole only under a size cap, written only where writing will work.

Every file a run reads whole (data sets, prompt lists, golden recordings, baselines, reports) goes
through :func:`read_capped`: a 2.7 GB "data set" once reached MemoryError (and, as a baseline, an
INTERNALERROR) because it was read and parsed whole. The size is checked before reading (a cheap
``stat``) and again while reading (a file that grows, a FIFO), so at most ``cap + 1`` bytes are read.

Every file a command writes at the end of its work (``--json``, ``--out``) is checked first with
:func:`check_writable`: the check tries what the write will do (create a file in the nearest existing
directory), so a read-only mount shows up even where ``os.access`` would say yes (as root). Nothing is
created or left behind. Errors are :class:`~pytest_sglang.errors.ConfigError` naming the option, the
path and the fix.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from pytest_sglang.errors import ConfigError

MiB = 1024 * 1024
#: The default cap of a file read whole: far above any real data set, prompt list or report
#: (the gsm8k test split is 0.7 MB, MMLU's 14k questions 5 MB), far below what exhausts a CI runner.
DEFAULT_CAP = 64 * MiB


def size_text(n: int) -> str:
    """``70.0 MiB`` / ``512 bytes``: a size as a message shows it."""
    return f"{n / MiB:.1f} MiB" if n >= MiB else f"{n:,} bytes"


def read_capped(path: str | Path, *, option: str, cap: int = DEFAULT_CAP, fix: str,
                too_large_fix: str = "pass the intended file; one that large is not one") -> bytes:
    """The bytes of ``path``; a file larger than ``cap`` is refused without being read.

    Args:
        path: the file.
        option: what named the file (``--baseline``, ``sglang_accuracy(data=...)``), for the error.
        cap: the largest size accepted, in bytes.
        fix: what to do when the file cannot be read (a missing file, a directory).
        too_large_fix: what to do when the file is larger than ``cap``.

    Raises:
        ConfigError: the file cannot be read, or is larger than ``cap`` (the message gives its size
            and the cap).
    """
    shown = str(path)
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > cap:
                raise _too_large(option, shown, size, cap, too_large_fix)
            data = fh.read(cap + 1)  # a file that grew, or a FIFO whose size stat cannot tell
    except OSError as exc:
        raise ConfigError(option, shown, f"cannot be read ({exc.strerror or type(exc).__name__})", fix) from None
    if len(data) > cap:
        raise _too_large(option, shown, len(data), cap, too_large_fix, at_least=True)
    return data


def read_capped_text(path: str | Path, *, option: str, cap: int = DEFAULT_CAP, fix: str,
                     too_large_fix: str = "pass the intended file; one that large is not one") -> str:
    """:func:`read_capped` decoded as UTF-8 (undecodable bytes replaced, never an exception)."""
    return read_capped(path, option=option, cap=cap, fix=fix, too_large_fix=too_large_fix).decode("utf-8", "replace")


def _too_large(option: str, path: str, size: int, cap: int, fix: str, *, at_least: bool = False) -> ConfigError:
    more = "at least " if at_least else ""
    return ConfigError(option, path, f"is {more}{size_text(size)}, larger than the {size_text(cap)} cap of a file "
                                     "read whole", fix)


def check_writable(path: str | Path, *, option: str, what: str) -> None:
    """Raise :class:`ConfigError` when ``path`` cannot be written as a file; create nothing.

    ``what`` says what the file is for (``the JSON result``), for the fix line.
    """
    target, text = Path(path), str(path)
    fix = f"give {option} a file path in a writable directory (it is where {what} is written at the end)"
    if target.is_dir():
        raise ConfigError(option, text, "is a directory, not a file", fix)
    if target.exists():
        try:
            with open(target, "a", encoding="utf-8"):  # append mode: opens for writing, changes nothing
                pass
        except OSError as exc:
            raise ConfigError(option, text, f"cannot be written ({exc.strerror or type(exc).__name__})", fix) from None
        return
    check_creatable(target.parent, option=option, value=text, fix=fix)


def check_creatable(directory: Path, *, option: str, value: str, fix: str) -> None:
    """``directory`` exists or can be created, and a file can be created in it."""
    existing = directory.absolute()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(option, value, f"cannot be created: {existing} is a file, not a directory", fix)
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as exc:
        raise ConfigError(option, value, f"cannot be written: directory {existing} is not writable "
                                         f"({exc.strerror or type(exc).__name__})", fix) from None
