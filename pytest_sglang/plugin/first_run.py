"""What the plugin says at the end of a run: what to run next (no tests ran), what was done to the server."""

from __future__ import annotations

import shlex

from pytest_sglang import ledger
from pytest_sglang.plugin.settings import Settings

__all__ = ["next_steps", "server_options", "what_was_done"]

DOCS = "docs/first-run.md (https://github.com/pytest-sglang/pytest-sglang/blob/main/docs/first-run.md)"


def server_options(settings: Settings) -> str:
    """The run's server options, to paste into the next command (credentials and keys masked)."""
    if settings.sglang_url is not None:
        return f"--sglang-url {settings.sglang_url}"  # str() of the parsed URL masks a password
    if settings.runner == "simulator" and settings.sglang_launch is None:
        return "--sglang-simulate"
    from pytest_sglang.sglang.args import display_launch  # lazy: reads SGLang's flag table

    runner = f"--sglang-runner {settings.runner} " if settings.runner != "process" else ""
    args = " ".join(display_launch(settings.launch_args or (), settings.sglang_command or ()))
    return f"{runner}--sglang-launch {shlex.quote(args)}"


def next_steps(settings: Settings) -> list[str]:
    """Terminal lines for a run with a server configured but no tests (pytest's exit code 5)."""
    opts = server_options(settings)
    return [
        "sglang: no tests ran. A server is configured; what to run next:",
        f"  pytest --pyargs pytest_sglang.smoke {opts}",
        "      readiness, identity, capacity, a short load, API shape; writes a baseline for the next run",
        f"  pytest --pyargs pytest_sglang.acceptance {opts}",
        "      correctness of the OpenAI and native APIs (47 checks)",
        "  or a test of your own, e.g. test_gate.py:",
        "      import pytest",
        "      @pytest.mark.sglang_throughput(requests=32, concurrency=4, input_len=256, output_len=32)",
        "      def test_throughput(): pass",
        f"      then: pytest test_gate.py {opts} --sglang-suggest-floors",
        f"  see {DOCS}",
    ]


def what_was_done() -> str | None:
    """The line listing what this process sent to servers, or None when it sent nothing."""
    tally = ledger.snapshot()
    return f"sglang: sent to the server by this run: {tally.describe()}" if tally else None
