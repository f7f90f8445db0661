"""``python -m pytest_sglang <command>``: load, plan, compare, eval, golden, trend, ab (ab runs pytest)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

_COMMANDS = {
    "load": ("pytest_sglang.cli.load", "run a load against a server and print SGLang bench_serving metrics"),
    "plan": ("pytest_sglang.cli.plan", "check hierarchical-cache host memory for SGLang launch args"),
    "compare": ("pytest_sglang.cli.compare", "compare two JSON reports (baseline regression)"),
    "eval": ("pytest_sglang.cli.eval", "score a server on arithmetic, gsm8k or mmlu, with a confidence interval"),
    "golden": ("pytest_sglang.cli.golden", "record greedy golden outputs, or check a server against them"),
    "trend": ("pytest_sglang.cli.trend", "find change points over a history of JSON reports (nightly runs)"),
    "ab": ("pytest_sglang.cli.ab", "interleaved A/B: launch two configurations in turn, judge the paired differences"),
}


#: As a shell reports a command ended by SIGINT (128 + 2).
EXIT_INTERRUPTED = 130


def _usage() -> str:
    lines = ["usage: python -m pytest_sglang {" + ",".join(_COMMANDS) + "} ...", "", "commands:"]
    lines += [f"  {name:<8} {text}" for name, (_, text) in _COMMANDS.items()]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(_usage())
        return 0 if args else 2
    command = _COMMANDS.get(args[0])
    if command is None:
        print(_usage(), file=sys.stderr)
        print(f"\nerror: unknown command {args[0]!r}", file=sys.stderr)
        return 2
    try:
        module = importlib.import_module(command[0])
        code: int = module.main(args[1:])
    except KeyboardInterrupt:
        # One place for every command: the first Ctrl-C ends it (what it started is stopped by the
        # command's own finally blocks as the exception passes), never a traceback.
        print(f"\ninterrupted: {args[0]} stopped", file=sys.stderr)
        return EXIT_INTERRUPTED
    return code


if __name__ == "__main__":
    sys.exit(main())
