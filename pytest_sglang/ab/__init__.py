"""The shipped A/B suite: one test that runs an interleaved A/B with the run's options.

    pytest --pyargs pytest_sglang.ab --sglang-launch "A's args" --sglang-ab-launch "B's args"
    python -m pytest_sglang ab --sglang-launch "A's args" --sglang-ab-launch "B's args" --requests 128

The load of each launch is :data:`~pytest_sglang.gates.load.ab.DEFAULT_LOAD` with the fields of
``PYTEST_SGLANG_AB_LOAD`` over it (JSON of :class:`~pytest_sglang.LoadSpec` fields, set by
``python -m pytest_sglang ab`` from its shape flags).
"""

from __future__ import annotations

import json
import os

from pytest_sglang.gates.load.ab import load_fields
from pytest_sglang.loadgen import LoadSpec

ENV = "PYTEST_SGLANG_AB_LOAD"


def load_spec(environ: dict[str, str] | None = None) -> LoadSpec:
    """The load each launch runs: the default under ``PYTEST_SGLANG_AB_LOAD``'s fields; a bad value names it."""
    env = os.environ if environ is None else environ
    text = env.get(ENV)
    try:
        fields = json.loads(text) if text else {}
        if not isinstance(fields, dict):
            raise ValueError("not a JSON object of LoadSpec fields")
        return LoadSpec(**load_fields(fields))  # type: ignore[arg-type]  # LoadSpec checks each value
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{ENV}={text!r}: {exc}. Fix: give a JSON object of LoadSpec fields, e.g. "
                         '{"requests": 64, "concurrency": 8}') from None
