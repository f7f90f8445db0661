"""Generated nightly histories: one minimal JSON report per run, as ``--sglang-report`` writes them."""

from __future__ import annotations

import datetime as _dt
import json
import math
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

START = _dt.datetime(2026, 11, 1, 2, 0, tzinfo=_dt.timezone.utc)
NODEID = "test_nightly.py::test_throughput"
FINGERPRINT: dict[str, Any] = {"model": "sim/tiny-llama", "gpu_model": "H100", "gpu_count": 1, "host": "8 CPUs",
                               "sglang_version": "0.5.23", "image": None, "runner": "simulator",
                               "launch_args": ["--sim-profile tiny"]}


def noisy(n: int, cv: float, seed: int, *, level: float = 1000.0, step_at: int | None = None,
          step: float = 0.0) -> list[float]:
    """``n`` nightly figures with a launch-to-launch CV ``cv`` (log-normal), times ``1 + step`` from ``step_at`` on."""
    rng = random.Random(seed)
    sigma = math.sqrt(math.log1p(cv * cv))
    return [level * (1 + (step if step_at is not None and i >= step_at else 0.0))
            * rng.lognormvariate(-sigma * sigma / 2, sigma) for i in range(n)]


def report(i: int, figures: Mapping[str, float], *, label: str | None = None,
           fingerprint: Mapping[str, Any] | None = None, failed: int = 0) -> dict[str, Any]:
    """Run ``i``'s report: written ``i`` days after :data:`START`, one load with ``figures``."""
    load = {"max_concurrency": 8, "random_input_len": 512, "random_output_len": 128, "completed": 200 - failed,
            "failed": failed, **figures}
    return {"schema_version": 2, "generated_at": (START + _dt.timedelta(days=i)).isoformat(timespec="seconds"),
            "run_label": label, "fingerprint": dict(fingerprint or FINGERPRINT),
            "tests": [{"nodeid": NODEID, "outcome": "passed", "loads": [load], "gates": []}]}


def write_history(folder: Path, series: Mapping[str, Sequence[float]], *,
                  fingerprints: Sequence[Mapping[str, Any]] | None = None) -> list[Path]:
    """One report per run in ``folder`` (named by label ``c<i>``), returned oldest first."""
    folder.mkdir(parents=True, exist_ok=True)
    runs = len(next(iter(series.values())))
    paths = []
    for i in range(runs):
        data = report(i, {m: v[i] for m, v in series.items()}, label=f"c{i:02d}",
                      fingerprint=fingerprints[i] if fingerprints else None)
        path = folder / f"run-{i:02d}.json"
        path.write_text(json.dumps(data))
        paths.append(path)
    return paths
