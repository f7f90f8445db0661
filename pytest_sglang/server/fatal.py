"""Known fatal lines of SGLang's log, each with the explanation users need (reference §9, §11).

Most specific first: the first pattern that matched a line explains the failure; generic lines
("Scheduler hit an exception") only when nothing better was seen.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pytest_sglang import redaction
from pytest_sglang.exits import FatalLine


def shorten(line: str, limit: int = 300) -> str:
    return line if len(line) <= limit else line[: limit - 3] + "..."


@dataclass(frozen=True)
class FatalPattern:
    pattern: re.Pattern[str]
    explanation: str  # may use {1}, {2}: the regex groups


#: Known fatal lines, most specific first; the first that matched explains the failure.
FATAL_PATTERNS: tuple[FatalPattern, ...] = (
    FatalPattern(re.compile(r"Not enough host memory available\. Requesting ([\d.]+) GB "
                            r"but only have ([\d.]+) GB free"),
                 "--hicache-size is GB per TP rank: every scheduler process (tp x pp x dp ranks) pins its "
                 "own host pool. This rank asked for {1} GB but its share of host memory ((available - "
                 "10 GiB) / ranks on this host) is {2} GB. Fix: lower --hicache-size (or --hicache-ratio) "
                 "so that size x ranks fits in host memory, or run on a host with more memory."),
    FatalPattern(re.compile(r"No host memory is left for HiCache after the 10 GiB reserve"),
                 "the host has less than SGLang's 10 GiB reserve left for hierarchical-cache host pools. "
                 "Fix: set --hicache-size (GB per rank) or --hicache-ratio explicitly, or free host memory."),
    FatalPattern(re.compile(r"Cannot automatically size HiCache host memory"),
                 "SGLang could not read the cgroup memory limits it needs to auto-size host pools. "
                 "Fix: set --hicache-size explicitly (GB per rank)."),
    FatalPattern(re.compile(r"scheduler died during initialization \(exit code: -9\)"),
                 "a scheduler process was killed by SIGKILL, most likely by the out-of-memory killer "
                 "(check `dmesg -T | grep -i oom`). Fix: lower --hicache-size / --mem-fraction-static "
                 "or add memory."),
    FatalPattern(re.compile(r"CUDA out of memory|torch\.OutOfMemoryError|OutOfMemoryError: CUDA"),
                 "the GPU ran out of memory. Fix: lower --mem-fraction-static, --max-total-tokens or "
                 "--cuda-graph-max-bs."),
    FatalPattern(re.compile(r"Torch not compiled with CUDA enabled"),
                 "this launch needs a CUDA GPU (e.g. --enable-hierarchical-cache pins host memory through "
                 "CUDA) but PyTorch has no CUDA here. Fix: run on a GPU host or drop the CUDA-only flags."),
    FatalPattern(re.compile(r"[Aa]ddress already in use"),
                 "another process already listens on this port. Fix: drop --port from the launch args and "
                 "pytest-sglang picks a free port."),
    FatalPattern(re.compile(r"Initialization failed\. warmup error"),
                 "the server's own warmup request failed (the traceback is in the log above). Fix: read the "
                 "traceback; --skip-server-warmup only hides the problem."),
    FatalPattern(re.compile(r"Received sigquit from a child process|Scheduler hit an exception"),
                 "a scheduler process failed during startup; the traceback in the log above names "
                 "the cause."),
)


def match_fatal(line: str) -> FatalLine | None:
    """The explained fatal line for ``line``, or None (traceback source lines are skipped)."""
    if line[:1] in (" ", "\t"):
        return None  # traceback internals (source lines such as `raise AssertionError(...)`)
    for priority, fatal in enumerate(FATAL_PATTERNS):
        m = fatal.pattern.search(line)
        if m is not None:
            text = fatal.explanation.format(*([m[0], *m.groups()]))
            return FatalLine(shorten(redaction.scrub(line.strip())), text, priority)
    return None
