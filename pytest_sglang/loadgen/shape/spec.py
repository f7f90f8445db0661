"""What load to generate: :class:`LoadSpec`, validated when built (bad values name the field and the fix)."""

# Over 300 lines: each LoadSpec field's check sits in the class beside it: a limit and its message, one edit.
from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import InitVar, dataclass
from typing import Any, cast

from pytest_sglang.errors import ConfigError
from pytest_sglang.fieldtypes import wrong_type
from pytest_sglang.loadgen.shape.cancel import cancel_count
from pytest_sglang.loadgen.workloads.forms import DEFAULT_TRACE_CAP, TRACE_KINDS, multiturn_shape
from pytest_sglang.loadgen.workloads.imageset import image_shape

APIS = ("native", "chat", "completions")
#: Dataset forms: ``random-ids``, ``sharegpt:PATH``, ``jsonl:PATH``, the traces ``mooncake:PATH`` and
#: ``burstgpt:PATH``, and ``multiturn[:KEY=VALUE,...]`` (see :mod:`.workloads`).
DATASET_KINDS = ("random-ids", "sharegpt", "jsonl", *TRACE_KINDS, "multiturn", "image", "mmmu")
DATASET_FORMS = ("random-ids, sharegpt:PATH, jsonl:PATH, mooncake:PATH, burstgpt:PATH, multiturn[:KEY=VALUE,...], "
                 "image[:KEY=VALUE,...] or mmmu:PATH")
#: Dataset kinds whose requests carry images (:mod:`.imageset`).
IMAGE_KINDS = ("image", "mmmu")
#: Prompt-per-request kinds: any number of processes or nodes can each build their share.
_SHARDABLE = ("random-ids", "sharegpt", "jsonl", *IMAGE_KINDS)
#: Largest ``trace_time_scale`` either way (beyond, a trace would take years or arrive all at once).
MAX_TIME_SCALE = 1e6
#: The longest a load may take, its deadline given or derived (a week, as a soak's longest duration). Every
#: wait of a load ends by then, whatever the input: a derived deadline is capped here, a given one refused
#: beyond it, and a trace row sent later (a timestamp in the wrong unit) is an error naming its line.
MAX_LOAD_S = 7 * 86_400.0

# Sizes beyond these are typos or runaway arithmetic, not loads: refused before anything is built.
MAX_REQUESTS = 10_000_000
#: Tokens per prompt / per answer: above the longest context any SGLang model serves today.
MAX_LEN = 1_048_576
#: Requests open at once: one connection each (an OS has about 28,000 ephemeral ports per address).
MAX_IN_FLIGHT = 65_536
MAX_PROCESSES = 256
#: Ray nodes a load is spread over (one shard per node and per ``processes``).
MAX_NODES = 1024
MAX_WARMUP = 10_000

# Derived timeouts. A request's default limit is a floor plus the time a server far slower than any
# real deployment would need (prefill 1,000 tok/s, decode 10 tok/s per request), scaled up when more
# requests are in flight than a server typically runs at once (the rest queue in front of it).
REQUEST_TIMEOUT_FLOOR_S = 60.0
SLOW_PREFILL_TOK_S = 1_000.0
SLOW_DECODE_TOK_S = 10.0
TYPICAL_BATCH = 64
#: Probe (10 s), /flush_cache (90 s) and connection set-up, on top of the requests' own limits.
SETUP_ALLOWANCE_S = 120.0
#: Random-ids vocabulary when the server's cannot be read (and for a spec never sent).
DEFAULT_VOCAB_SIZE = 1000
MAX_VOCAB = 10_000_000
#: A prompt-token tolerance beyond this (10x the tokens sent) would flag nothing.
MAX_TOLERANCE_PCT = 1000.0
#: Warmup requests ask for at most this many tokens (as bench_serving).
WARMUP_MAX_TOKENS = 32


@dataclass(frozen=True)
class LoadSpec:
    """One load shape. Names follow ``sglang.bench_serving`` where it has one.

    Defaults differ from bench_serving in two places, on purpose: ``range_ratio`` is 1.0 (a gate that
    says ``input_len=4000`` means 4000 tokens; bench_serving's 0.0 draws lengths uniformly in
    ``[1, L]``), and the random-ids vocabulary (``vocab_size``) is the model's, read from the server.
    ``timeout_s`` is the deprecated name of ``request_timeout_s``.
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
    #: Seconds one request may take, send to ``[DONE]`` (warmup included); None = derived from the
    #: workload (:meth:`request_timeout`). A request over it fails with kind ``timeout``.
    request_timeout_s: float | None = None
    #: One deadline for the whole load (probe, warmup, flush, timed run); None = derived
    #: (:meth:`load_timeout`). When it passes, requests in flight fail with kind ``timeout`` and the
    #: rest are not sent (``LoadResult.not_sent``).
    load_timeout_s: float | None = None
    #: POST /flush_cache?timeout=60 after the warmup, before the timed run.
    flush_cache: bool = False
    #: Client processes sharing the load (when one core cannot keep up); with ``nodes``, per node.
    processes: int = 1
    #: Ray nodes sharing the load (when one host cannot keep up): ``nodes x processes`` shards, each a
    #: Ray actor pinned to its node. Needs a connected Ray cluster (``ray.init``) and the ``ray`` extra.
    nodes: int = 1
    #: ``model`` sent to the OpenAI-compatible APIs (SGLang does not check it).
    model: str = "default"
    temperature: float = 0.0
    #: Token ids for random-ids prompts are drawn from [10, vocab_size); None = the model's, read from the
    #: server before the load (:mod:`.vocab`; 1000 when it cannot be read, said in the result).
    vocab_size: int | None = None
    #: Sample the server's /metrics (running/queued requests, token usage) during the run.
    sample_server_metrics: bool = True
    #: Per-request records kept whole. Beyond, a uniform sample of this many is kept, latency
    #: percentiles come from it and the result says so (means, counts and maxima stay exact).
    max_records: int = 100_000
    #: Trace replay: a request is sent at (its trace time - the first's) x this factor. SGLang's
    #: bench_serving calls it ``--mooncake-slowdown-factor`` (2.0 = twice as slow, 0.1 = 10x faster).
    trace_time_scale: float = 1.0
    #: Server's ``prompt_tokens`` may differ from the tokens sent by this many % before the load is
    #: flagged (:mod:`.tokencount`): beyond, input tok/s counts tokens the client did not send. None:
    #: 5 % where ids were sent; a chat load (its template and tokenizer add tokens) is then reported only.
    prompt_token_tolerance_pct: float | None = None
    #: The share of timed requests whose client goes away mid-answer (AIPerf's ``--request-cancellation-rate``,
    #: as a fraction): exactly ``round(cancel_rate x requests)`` of them, chosen with ``seed`` (:mod:`.cancel`).
    cancel_rate: float = 0.0
    #: A cancelled request's client closes the connection once this many chunks of text arrived (one token each
    #: at SGLang's default ``--stream-interval 1``); None = half of ``output_len``. Needs ``cancel_rate``.
    cancel_after_tokens: int | None = None
    #: Also compute the figures inside the steady-state window (first completion to last send: no ramp-up,
    #: no drain; :mod:`.steady`) into ``LoadResult.steady_state``; the bench_serving figures stay whole-run.
    steady_state: bool = False
    timeout_s: InitVar[float | None] = None

    def __post_init__(self, timeout_s: float | None) -> None:
        """Warn about the deprecated ``timeout_s`` and reject invalid fields."""
        if timeout_s is not None:
            warnings.warn(
                "LoadSpec(timeout_s=...) is deprecated: it is the per-request limit, now "
                "request_timeout_s= (load_timeout_s= bounds the whole load)",
                DeprecationWarning,
                stacklevel=3,
            )
            if self.request_timeout_s is None:
                object.__setattr__(self, "request_timeout_s", timeout_s)
        self._check_types()
        self._check_shape()
        self._check_sizes()
        self._check_other()
        self._check_cancel()

    def _check_types(self) -> None:
        """Each field's type first: named here, not a TypeError from a comparison further down."""
        wrong = wrong_type(self, _TYPED_HERE)
        if wrong is not None:
            _bad(wrong.name, wrong.value, wrong.problem, f"give {wrong.name} as {wrong.expected}")
        if not math.isfinite(self.temperature) or self.temperature < 0:
            _bad("temperature", self.temperature, "must be a finite number >= 0", "use 0.0 for greedy decoding")
        for name in ("dataset", "model"):
            if not getattr(self, name):
                _bad(name, "", "is empty", "see docs/loadgen.md for the datasets" if name == "dataset"
                     else "give the served model's name")

    def _check_shape(self) -> None:
        _count("requests", self.requests, MAX_REQUESTS, "run for a fixed time with load_timeout_s= instead")
        if self.concurrency is not None:
            _count("concurrency", self.concurrency, MAX_IN_FLIGHT, "each request in flight holds a connection")
        if self.request_rate is not None and not (self.request_rate > 0 and math.isfinite(self.request_rate)):
            _bad(
                "request_rate",
                self.request_rate,
                "must be a finite number > 0 requests/s",
                "give a positive rate, or None for all requests at once",
            )
        paced_elsewhere = dataset_parts(self.dataset)[0] in (*TRACE_KINDS, "multiturn")  # trace clock, sessions
        if self.concurrency is None and self.request_rate is None and self.requests > MAX_IN_FLIGHT \
                and not paced_elsewhere:
            _bad(
                "requests",
                self.requests,
                f"would all be sent at once (no concurrency, no request_rate): at most {MAX_IN_FLIGHT:,}",
                "give concurrency=N (requests in flight) or request_rate=R (arrivals per second)",
            )
        if not (self.burstiness > 0 and math.isfinite(self.burstiness)):
            _bad("burstiness", self.burstiness, "must be a finite number > 0", "use 1.0 for Poisson arrivals")
        # The gaps between arrivals are drawn with scale 1 / (rate x burstiness): a product of 0 divides by zero.
        if self.request_rate is not None and not self.request_rate * self.burstiness > 0:
            _bad("burstiness", self.burstiness, f"times request_rate={self.request_rate:g} is 0 in floating point",
                 "give a request_rate and burstiness whose product is a normal number, e.g. burstiness=1.0")

    def _check_sizes(self) -> None:
        _count("input_len", self.input_len, MAX_LEN, "prompts are built in memory")
        _count("output_len", self.output_len, MAX_LEN, "each answer's token times are kept in memory")
        if not (0.0 <= self.range_ratio <= 1.0):
            _bad(
                "range_ratio",
                self.range_ratio,
                "must be between 0 and 1",
                "use 1.0 for fixed lengths, 0.5 for lengths drawn in [L/2, L]",
            )
        if isinstance(self.warmup, bool) or not isinstance(self.warmup, int) or self.warmup < 0:
            _bad("warmup", self.warmup, "must be a whole number >= 0", "use 0 to skip warmup")
        if self.warmup > MAX_WARMUP:
            _bad("warmup", self.warmup, f"is more than {MAX_WARMUP:,} warmup requests", "a few warm a server")
        _count("max_records", self.max_records, MAX_REQUESTS, "100,000 records give exact percentiles")
        for name in ("request_timeout_s", "load_timeout_s"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf
            ):
                _bad(name, value, "must be a finite number of seconds > 0", "give seconds, or None to derive it")
            if value is not None and value > MAX_LOAD_S:
                _bad(name, value, f"is more than the limit of {MAX_LOAD_S:,.0f} s (a week)",
                     f"give at most {MAX_LOAD_S:,.0f} s, or None to derive it")

    def _check_other(self) -> None:
        if not isinstance(self.steady_state, bool):
            _bad("steady_state", self.steady_state, "must be True or False",
                 "steady_state=True adds the figures of the steady-state window (no ramp-up, no drain)")
        if self.api not in APIS:
            _bad("api", self.api, "unknown API", f"use one of {', '.join(APIS)}")
        _count("processes", self.processes, MAX_PROCESSES, "one process per core is enough")
        _count("nodes", self.nodes, MAX_NODES, "one load shard per node and process")
        self._check_dataset()
        if self.concurrency is not None and self.processes > self.concurrency:
            _bad(
                "processes",
                self.processes,
                f"is larger than concurrency={self.concurrency}",
                "use at most one process per concurrent request",
            )
        if self.concurrency is not None and self.nodes * self.processes > self.concurrency:
            _bad(
                "nodes",
                self.nodes,
                f"times processes={self.processes} makes {self.nodes * self.processes} load shards, more than "
                f"concurrency={self.concurrency}",
                "use at most one shard (nodes x processes) per concurrent request",
            )
        tol = self.prompt_token_tolerance_pct
        if tol is not None and (isinstance(tol, bool) or not isinstance(tol, (int, float))
                                or not 0 <= tol <= MAX_TOLERANCE_PCT):
            _bad("prompt_token_tolerance_pct", tol, f"must be a number of % from 0 to {MAX_TOLERANCE_PCT:g}",
                 "use 5.0 to flag a load whose server-counted prompt tokens differ from those sent by over 5%")
        vocab = self.vocab_size
        if vocab is not None and (isinstance(vocab, bool) or not isinstance(vocab, int) or not 11 < vocab <= MAX_VOCAB):
            _bad("vocab_size", vocab, f"must be a whole number of tokens from 12 to {MAX_VOCAB:,}",
                 "give the model's vocabulary size (config.json vocab_size), or None to read it from the server")

    def _check_cancel(self) -> None:
        rate, after = self.cancel_rate, self.cancel_after_tokens
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0.0 <= rate <= 1.0:
            _bad("cancel_rate", rate, "must be a fraction of the requests from 0 to 1",
                 "use 0.2 to cancel one request in five mid-answer (0 = none)")
        if after is not None:
            if isinstance(after, bool) or not isinstance(after, int) or after < 1:
                _bad("cancel_after_tokens", after, "must be a whole number of tokens >= 1",
                     "give the tokens a cancelled request reads before it goes away, e.g. 8")
            if not rate:
                _bad("cancel_after_tokens", after, "cancels nothing without cancel_rate (it is 0)",
                     "give cancel_rate=0.2 too, or drop cancel_after_tokens")
        if not rate:
            return
        if self.dataset.partition(":")[0] not in ("random-ids", "sharegpt", "jsonl"):
            _bad("cancel_rate", rate, f"applies to random-ids, sharegpt and jsonl loads, not to dataset {self.dataset}",
                 "drop cancel_rate, or use a random-ids/sharegpt/jsonl dataset")
        if self.cancel_after() >= self.output_len:
            _bad("cancel_after_tokens", self.cancel_after(), f"is not below output_len={self.output_len}: the answer "
                 "ends before the client goes away, so no request is cancelled and the drain checks nothing",
                 f"give cancel_after_tokens from 1 to {self.output_len - 1}, or a longer output_len")
        if not cancel_count(self.requests, rate):
            _bad("cancel_rate", rate, f"of requests={self.requests} cancels no request (round(rate x requests) = 0)",
                 f"give cancel_rate >= {0.5 / self.requests:.3g}, or more requests")

    def cancel_after(self) -> int:
        """Tokens a cancelled request reads before its client goes away: ``cancel_after_tokens``, or half the answer."""
        return self.cancel_after_tokens if self.cancel_after_tokens is not None else max(1, self.output_len // 2)

    def _check_dataset(self) -> None:
        kind, path = dataset_parts(self.dataset)
        needs_path = kind != "random-ids"
        if kind not in DATASET_KINDS or (needs_path != bool(path) and kind not in ("multiturn", "image")) or (
                kind == "random-ids" and ":" in self.dataset):
            _bad("dataset", self.dataset, "unknown dataset", f"use {DATASET_FORMS}")
        scale = self.trace_time_scale
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not (
                1 / MAX_TIME_SCALE <= scale <= MAX_TIME_SCALE):
            _bad("trace_time_scale", scale, f"must be a number from {1 / MAX_TIME_SCALE:g} to {MAX_TIME_SCALE:g}",
                 "use 1.0 to replay at the recorded pace, 0.1 for 10x faster, 2.0 for twice as slow")
        if scale != 1.0 and kind not in TRACE_KINDS:  # it would change nothing: say so rather than ignore it
            _bad("trace_time_scale", scale, f"applies to a trace replay only, not to dataset {kind}",
                 "drop trace_time_scale, or give dataset='mooncake:PATH' or 'burstgpt:PATH'")
        for name in ("processes", "nodes"):
            if kind not in _SHARDABLE and getattr(self, name) > 1:
                _bad(name, getattr(self, name), f"must be 1 for dataset {kind} (one timeline: a trace's clock or "
                     f"each session's turns)", f"drop {name}=, or use a random-ids/sharegpt/jsonl dataset")
        if kind in TRACE_KINDS and self.request_rate is not None:
            _bad("request_rate", self.request_rate, f"cannot be combined with the {kind} trace, which gives the "
                 "arrival times", "drop request_rate; speed the replay up or down with trace_time_scale")
        if kind == "multiturn":
            self._check_multiturn()
        if kind in IMAGE_KINDS:
            self._check_images(kind)

    def _check_images(self, kind: str) -> None:
        # bench_serving's image dataset: "sglang" (native /generate) and "sglang-oai-chat" only.
        if self.api == "completions":
            _bad("api", self.api, f"cannot carry the images of dataset {kind} (as bench_serving's image dataset)",
                 "use api='chat' (image_url content parts) or api='native' (image_data)")
        token = image_shape(self.dataset).image_token if kind == "image" else None
        if self.api == "native" and token is None:
            _bad("api", self.api, f"sends dataset {kind}'s images in image_data, which the server matches to the "
                 "model's image placeholder in the text: without it they would be ignored",
                 "add image_token=PLACEHOLDER to the image dataset (Qwen2-VL: <|vision_start|><|image_pad|>"
                 "<|vision_end|>), or use api='chat' (the server applies its chat template)")

    def _check_multiturn(self) -> None:
        shape = multiturn_shape(self.dataset)
        if self.api != "chat":
            _bad("api", self.api, "a multiturn dataset is a conversation through the chat API (as SGLang's "
                 "bench_serving multi-turn mode)", "use api='chat' (--api chat)")
        if self.request_rate is not None:
            _bad("request_rate", self.request_rate, "cannot pace a multiturn dataset (sessions pace themselves: "
                 "turns follow answers after think_s)", "drop request_rate; give concurrency= (sessions at once)")
        sessions = shape.session_count(self.requests)
        if self.concurrency is None and sessions > MAX_IN_FLIGHT:
            _bad("dataset", self.dataset, f"has {sessions:,} sessions, all at once (no concurrency): "
                 f"at most {MAX_IN_FLIGHT:,}", "give concurrency=N (sessions in flight)")

    def vocab(self) -> int:
        """The random-ids vocabulary size: ``vocab_size``, or :data:`DEFAULT_VOCAB_SIZE` before it is read."""
        return self.vocab_size or DEFAULT_VOCAB_SIZE

    def is_trace(self) -> bool:
        """Whether the dataset is a recorded trace replayed on its own clock."""
        return dataset_parts(self.dataset)[0] in TRACE_KINDS

    def replace(self, **changes: int | float | str | bool | None) -> LoadSpec:
        """A copy of this spec with ``changes`` applied (validated again: a wrong type is a ConfigError)."""
        return dataclasses.replace(self, **cast("dict[str, Any]", changes))

    def with_timeouts(self, request_timeout_s: float | None, load_timeout_s: float | None) -> LoadSpec:
        """This spec with defaults (e.g. the plugin's options) for the timeouts it leaves unset."""
        changes = {k: v for k, v in (("request_timeout_s", request_timeout_s), ("load_timeout_s", load_timeout_s))
                   if v is not None and getattr(self, k) is None}
        return self.replace(**changes) if changes else self

    def to_dict(self) -> dict[str, Any]:
        """The spec as JSON-ready data."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LoadSpec:
        """A spec read back from :meth:`to_dict` data, older reports' ``timeout_s`` included."""
        values = dict(data)
        if "timeout_s" in values:  # reports written before request_timeout_s existed
            old = values.pop("timeout_s")
            values.setdefault("request_timeout_s", old)
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in names})

    def in_flight(self) -> int:
        """Requests the load keeps open at once at most (with a rate: as many as have arrived)."""
        if self.concurrency is not None:
            return self.concurrency
        if self.is_trace():
            return min(self.requests, DEFAULT_TRACE_CAP)
        return self.requests if self.request_rate is None else min(self.requests, TYPICAL_BATCH)

    def request_timeout(self, output_len: int | None = None, input_len: int | None = None) -> float:
        """``request_timeout_s``, or the default derived from the workload (see the module constants).

        ``input_len``/``output_len``: one request's lengths when they are not the spec's (a trace's).
        """
        if self.request_timeout_s is not None:
            return float(self.request_timeout_s)
        out = self.output_len if output_len is None else output_len
        work = (self.input_len if input_len is None else input_len) / SLOW_PREFILL_TOK_S + out / SLOW_DECODE_TOK_S
        return min(MAX_LOAD_S, REQUEST_TIMEOUT_FLOOR_S + work * max(1.0, self.in_flight() / TYPICAL_BATCH))

    def load_timeout(self, span_s: float = 0.0) -> float:
        """``load_timeout_s``, or the time the load may take when every request takes its whole limit.

        ``span_s``: a trace's replay time (its last request's scaled time), which the caller read. Never more
        than :data:`MAX_LOAD_S` (a derived value beyond is runaway arithmetic: a rate of 1e-9/s, 10 million
        requests one at a time); NaN-safe (``min`` keeps the first argument unless the second is smaller).
        """
        if self.load_timeout_s is not None:
            return float(self.load_timeout_s)
        return min(MAX_LOAD_S, self._derived_load_timeout(span_s))

    def _derived_load_timeout(self, span_s: float) -> float:
        per = self.request_timeout()
        kind = dataset_parts(self.dataset)[0]
        if kind in TRACE_KINDS:
            return SETUP_ALLOWANCE_S + self._warm_time() + span_s + per * math.ceil(self.requests / self.in_flight())
        if kind == "multiturn":
            shape = multiturn_shape(self.dataset)
            sessions = shape.session_count(self.requests)
            waves = math.ceil(sessions / self.concurrency) if self.concurrency else 1
            return SETUP_ALLOWANCE_S + self._warm_time() + waves * shape.turns * (per + shape.think_s)
        waves = math.ceil(self.requests / self.concurrency) if self.concurrency else 1
        arrivals = 2 * self.requests / self.request_rate if self.request_rate is not None else 0.0
        return SETUP_ALLOWANCE_S + self._warm_time() + max(arrivals + per, waves * per)

    def _warm_time(self) -> float:
        if not self.warmup:
            return 0.0
        width = min(self.warmup, self.concurrency or self.warmup)
        return math.ceil(self.warmup / width) * self.request_timeout(min(self.output_len, WARMUP_MAX_TOKENS))

    def shape(self) -> str:
        """The load shape in one line, for messages and reports."""
        arrival = f"concurrency={self.concurrency if self.concurrency is not None else 'unlimited'}"
        if self.request_rate is not None:
            arrival += f", request_rate={self.request_rate:g}/s"
            if self.burstiness != 1.0:
                arrival += f" (burstiness {self.burstiness:g})"
        if self.is_trace():
            arrival = (f"trace times x {self.trace_time_scale:g}, in flight at most "
                       f"{self.concurrency if self.concurrency is not None else DEFAULT_TRACE_CAP}")
            return f"up to {self.requests} requests, {arrival}, lengths from the trace, api={self.api}, " \
                   f"dataset={self.dataset}"
        lens = f"input_len={self.input_len}, output_len={self.output_len}"
        if self.range_ratio != 1.0:
            lens += f", range_ratio={self.range_ratio:g}"
        return f"{self.requests} requests, {arrival}, {lens}, api={self.api}, dataset={self.dataset}"


def dataset_parts(dataset: str) -> tuple[str, str]:
    """Split a ``dataset`` value into its kind and path (``"sharegpt:PATH"``)."""
    kind, _, path = dataset.partition(":")
    return kind, path


#: The fields no check below types (a comparison would raise TypeError, or the value was taken as it came);
#: the others say a wrong type in their own words (``must be a whole number >= 1``).
_TYPED_HERE = ("request_rate", "burstiness", "range_ratio", "temperature", "ignore_eos", "flush_cache",
               "sample_server_metrics", "seed", "dataset", "model")


def _count(name: str, value: object, limit: int, why: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        _bad(name, value, "must be a whole number >= 1", f"give {name} as a positive integer")
    elif value > limit:
        _bad(name, value, f"is more than the limit of {limit:,}", f"give at most {limit:,} ({why})")


def _bad(name: str, value: object, problem: str, fix: str) -> None:
    raise ConfigError(f"LoadSpec.{name}", value, problem, fix)
