"""Ray's own output in this process (the driver) goes to a file, not to pytest's output.

Ray writes to the driver's stderr and stdout by itself: its ``ray`` logger has its own stderr handler
(``Overwriting previous Ray address ...`` at INFO), and a thread of ``ray.init`` prints the raylet's
error messages for the job (``(raylet) A worker died ...``) to stdout, whatever ``log_to_driver`` says.
In a pytest run those lines land unlabelled among the tests' output, next to the diagnosis the plugin
already gives (a dead load shard's :class:`LoadGenError` names its node and Ray's reason). :func:`route`
sends both to one file, named by :func:`path` (the messages that explain a failure point to it).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import ray._private.worker as ray_worker

__all__ = ["FILE_NAME", "path", "route"]

#: The file's name in the run's log directory.
FILE_NAME = "ray-driver.log"

_lock = threading.Lock()
_path: Path | None = None
# Ray's printer of forwarded output, kept for everything that is not the raylet's (log_to_driver=True).
# A private name of Ray's: a Ray without it keeps printing the raylet's lines, and nothing else breaks.
_ray_print: Callable[..., None] | None = getattr(ray_worker, "print_to_stdstream", None)


def path() -> Path | None:
    """Where Ray's output of this process goes (None: not routed, Ray prints it)."""
    return _path


def route(where: Path) -> Path:
    """From now on Ray's log records and the raylet's messages of this process are appended to ``where``.

    Once per process (the first call wins, as one process joins one cluster); returns the file in use.
    """
    global _path
    with _lock:
        if _path is not None:
            return _path
        where.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(where, encoding="utf-8", delay=True)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger = logging.getLogger("ray")
        for old in list(logger.handlers):  # Ray's own: a stderr handler (its records never propagate)
            logger.removeHandler(old)
        logger.addHandler(handler)
        # The raylet's messages have no logger: Ray's error thread calls this module-level printer by name.
        if _ray_print is not None:
            ray_worker.print_to_stdstream = _print
        _path = where
        return where


def _print(data: Mapping[str, object], ignore_prefix: bool) -> None:
    if data.get("pid") != "raylet" or _path is None:
        if _ray_print is not None:
            _ray_print(data, ignore_prefix=ignore_prefix)
        return
    lines = data.get("lines")
    text = "".join(f"{time.strftime('%Y-%m-%d %H:%M:%S')} (raylet) {line}\n"
                   for line in (lines if isinstance(lines, list) else [lines]))
    try:
        with _path.open("a", encoding="utf-8") as out:
            out.write(text)
    except OSError:  # the log directory went away: Ray's message is not worth a crash of its thread
        pass
