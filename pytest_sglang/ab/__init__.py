"""The shipped A/B suite: one test that runs an interleaved A/B with the run's options.

    pytest --pyargs pytest_sglang.ab --sglang-launch "A's args" --sglang-ab-launch "B's args"
    python -m pytest_sglang ab --sglang-launch "A's args" --sglang-ab-launch "B's args" --requests 64

The load of each launch is ``PYTEST_SGLANG_AB_LOAD`` (JSON of :class:`~pytest_sglang.LoadSpec` fields, set
by ``python -m pytest_sglang ab`` from its shape flags), else :data:`DEFAULT_LOAD`.
"""

from __future__ import annotations

import json
import os

from pytest_sglang.loadgen import LoadSpec

ENV = "PYTEST_SGLANG_AB_LOAD"
#: A short load of the bench_serving shape (1024 in, 128 out), enough requests for a stable throughput.
DEFAULT_LOAD: dict[str, object] = {"requests": 64, "concurrency": 8, "input_len": 1024, "output_len": 128}


def load_spec(environ: dict[str, str] | None = None) -> LoadSpec:
    """The load each launch runs: ``PYTEST_SGLANG_AB_LOAD`` or the default; a bad value names the variable."""
    env = os.environ if environ is None else environ
    text = env.get(ENV)
    try:
        fields = json.loads(text) if text else DEFAULT_LOAD
        if not isinstance(fields, dict):
            raise ValueError("not a JSON object of LoadSpec fields")
        return LoadSpec(**fields)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{ENV}={text!r}: {exc}. Fix: give a JSON object of LoadSpec fields, e.g. "
                         '{"requests": 64, "concurrency": 8}') from None
