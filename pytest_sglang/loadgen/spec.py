"""What load to generate: :class:`LoadSpec`, validated when built (bad values name the field and the fix)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from pytest_sglang.errors import ConfigError

APIS = ("native", "chat", "completions")
#: Dataset forms: ``random-ids``, ``sharegpt:PATH``, ``jsonl:PATH``.
DATASET_KINDS = ("random-ids", "sharegpt", "jsonl")


@dataclass(frozen=True)
class LoadSpec:
    """One load shape. Names follow ``sglang.bench_serving`` where it has one.

    Defaults differ from bench_serving in two places, on purpose: ``range_ratio`` is 1.0 (a gate that
    says ``input_len=4000`` means 4000 tokens; bench_serving's 0.0 draws lengths uniformly in
    ``[1, L]``), and the random-ids vocabulary is small (``vocab_size``) so ids are valid for any model.
    """

    requests: int = 64
    #: Maximum requests in flight (bench_serving ``--max-concurrency``); None = no cap.
    concurrency: int | None = None
    #: Poisson arrival rate in requests/s; None = all requests at once (bench_serving ``inf``).
    request_rate: float | None = None
    #: Gamma shape of inter-arrival times (1.0 = Poisson; < 1 burstier), as bench_serving.
    burstiness: float = 1.0
    input_len: int = 1024
    output_len: int = 128
    range_ratio: float = 1.0
    dataset: str = "random-ids"
    api: str = "native"
    ignore_eos: bool = True
    warmup: int = 1
    seed: int = 42
    #: Per-request timeout in seconds (whole request, first byte to [DONE]).
    timeout_s: float = 600.0
    #: POST /flush_cache?timeout=60 after the warmup, before the timed run.
    flush_cache: bool = False
    #: Client processes sharing the load (when one core cannot keep up).
    processes: int = 1
    #: ``model`` sent to the OpenAI-compatible APIs (SGLang does not check it).
    model: str = "default"
    temperature: float = 0.0
    #: Token ids for random-ids prompts are drawn from [10, vocab_size).
    vocab_size: int = 1000
    #: Sample the server's /metrics (running/queued requests, token usage) during the run.
    sample_server_metrics: bool = True

    def __post_init__(self) -> None:
        _positive_int("requests", self.requests)
        if self.concurrency is not None:
            _positive_int("concurrency", self.concurrency)
        if self.request_rate is not None and not (self.request_rate > 0):
            _bad(
                "request_rate",
                self.request_rate,
                "must be > 0 requests/s",
                "give a positive rate, or None for all requests at once",
            )
        if not (self.burstiness > 0 and math.isfinite(self.burstiness)):
            _bad("burstiness", self.burstiness, "must be a finite number > 0", "use 1.0 for Poisson arrivals")
        _positive_int("input_len", self.input_len)
        _positive_int("output_len", self.output_len)
        if not (0.0 <= self.range_ratio <= 1.0):
            _bad(
                "range_ratio",
                self.range_ratio,
                "must be between 0 and 1",
                "use 1.0 for fixed lengths, 0.5 for lengths drawn in [L/2, L]",
            )
        if self.api not in APIS:
            _bad("api", self.api, "unknown API", f"use one of {', '.join(APIS)}")
        kind, path = dataset_parts(self.dataset)
        needs_path = kind != "random-ids"
        if kind not in DATASET_KINDS or needs_path != bool(path):
            _bad("dataset", self.dataset, "unknown dataset", "use random-ids, sharegpt:PATH or jsonl:PATH")
        if self.warmup < 0:
            _bad("warmup", self.warmup, "must be >= 0", "use 0 to skip warmup")
        if not (self.timeout_s > 0):
            _bad("timeout_s", self.timeout_s, "must be > 0 seconds", "give seconds per request")
        _positive_int("processes", self.processes)
        if self.concurrency is not None and self.processes > self.concurrency:
            _bad(
                "processes",
                self.processes,
                f"is larger than concurrency={self.concurrency}",
                "use at most one process per concurrent request",
            )
        if self.vocab_size <= 11:
            _bad("vocab_size", self.vocab_size, "must be > 11", "give the model's vocabulary size")

    def replace(self, **changes: Any) -> LoadSpec:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LoadSpec:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    def shape(self) -> str:
        """The load shape in one line, for messages and reports."""
        arrival = f"concurrency={self.concurrency if self.concurrency is not None else 'unlimited'}"
        if self.request_rate is not None:
            arrival += f", request_rate={self.request_rate:g}/s"
            if self.burstiness != 1.0:
                arrival += f" (burstiness {self.burstiness:g})"
        lens = f"input_len={self.input_len}, output_len={self.output_len}"
        if self.range_ratio != 1.0:
            lens += f", range_ratio={self.range_ratio:g}"
        return f"{self.requests} requests, {arrival}, {lens}, api={self.api}, dataset={self.dataset}"


def dataset_parts(dataset: str) -> tuple[str, str]:
    kind, _, path = dataset.partition(":")
    return kind, path


def _positive_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        _bad(name, value, "must be a whole number >= 1", f"give {name} as a positive integer")


def _bad(name: str, value: object, problem: str, fix: str) -> None:
    raise ConfigError(f"LoadSpec.{name}", value, problem, fix)
