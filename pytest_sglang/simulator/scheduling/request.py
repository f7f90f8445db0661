"""One generation request as the scheduler sees it.

Its own module: the engine and its statistics both read it, and neither imports the other for it).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

from pytest_sglang.simulator import tokenizer
from pytest_sglang.simulator.scheduling.radix import Node
from pytest_sglang.simulator.scheduling.sink import Sink

EmitFn = Callable[["Request", bool], None]
#: SGLang's ``meta_info.finish_reason``: ``{"type": "length", "length": n}``, ``{"type": "stop",
#: "matched": token id or stop string}``, ``{"type": "abort", ...}``.
FinishReason = dict[str, int | str]


class Request:
    """One generation request as the scheduler sees it."""

    __slots__ = (
        "aborted",
        "admitted_perf",
        "arrival",
        "arrival_perf",
        "cached_device",
        "cached_host",
        "cached_storage",
        "crosstalk",
        "done",
        "drift",
        "emit",
        "encoder_s",
        "endpoint",
        "extra",
        "finish",
        "first_perf",
        "ignore_eos",
        "last_perf",
        "leak",
        "log_metrics",
        "max_new",
        "natural_len",
        "node",
        "out_ids",
        "pieces",
        "prompt_ids",
        "reserved",
        "rid",
        "routed_dp_rank",
        "script",
        "seed",
        "sink",
        "stop",
        "stream",
        "text",
    )

    def __init__(
        self,
        rid: str,
        prompt_ids: list[int],
        max_new: int,
        *,
        ignore_eos: bool,
        stop: list[str],
        random_seed: int,
        emit: EmitFn,
        sink: Sink,
        stream: bool,
        endpoint: str,
        log_metrics: bool = True,
        script: Sequence[tuple[int, str]] | None = None,
        sample_key: int | None = None,
        drift: float = 0.0,
        record_pieces: bool = False,
        routed_dp_rank: int | None = None,
        encoder_s: float = 0.0,
    ) -> None:
        self.rid = rid
        #: simulated seconds the vision encoder spends on this request's images (in its prefill)
        self.encoder_s = encoder_s
        #: the DP rank the request is pinned to (``routed_dp_rank`` / ``data_parallel_rank``), None: balanced
        self.routed_dp_rank = routed_dp_rank
        self.prompt_ids = prompt_ids
        self.max_new = max_new
        self.ignore_eos = ignore_eos
        self.stop = stop
        self.seed = tokenizer.output_seed(prompt_ids, random_seed)
        if sample_key is not None:  # sampled decoding: the seed (or a random draw) picks the tokens
            self.seed = tokenizer.mix(self.seed, sample_key)
        self.natural_len = tokenizer.natural_length(self.seed)
        self.out_ids: list[int] = []
        self.text = ""
        self.emit = emit
        self.sink = sink
        self.stream = stream
        self.endpoint = endpoint
        self.log_metrics = log_metrics
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        #: {"type": "length", "length": n} | {"type": "stop", "matched": ...} | abort
        self.finish: FinishReason | None = None
        self.cached_device = 0
        self.cached_host = 0
        #: tokens read back from the L3 storage tier (--hicache-storage-backend), not counted in cached_host
        self.cached_storage = 0
        self.node: Node | None = None
        self.reserved = 0
        self.arrival = time.time()
        self.arrival_perf = time.perf_counter()
        self.admitted_perf = 0.0
        self.first_perf = 0.0
        self.last_perf = 0.0
        self.extra: dict[str, object] = {}
        self.aborted = False
        #: (id, text) the model writes before EOS (an answer, JSON, a tool call); None: filler text
        self.script = script
        #: --sim-fault token-drift: the fraction of tokens that differ (as after a numerics change)
        self.drift = drift
        #: each output token's text (for logprobs and parsers); None when nobody needs them
        self.pieces: list[str] | None = [] if record_pieces else None
        #: --sim-fault slot-leak: an aborted request keeps its slot; cross-talk: takes a neighbour's tokens
        self.leak = False
        self.crosstalk = False

    @property
    def cached(self) -> int:
        return self.cached_device + self.cached_host + self.cached_storage

    def planned(self, k: int) -> tuple[int, str] | None:
        """The token the model writes at output position ``k``; None where it would end (EOS)."""
        if self.script is not None:
            return self.script[k] if k < len(self.script) else None
        return tokenizer.output_token(self.seed, k) if k + 1 < self.natural_len else None

    def advance(self, source: Request | None = None) -> None:
        """Generate the next token and decide whether the request is finished.

        ``source``: the request whose next token this one gets instead of its own (cross-talk).
        """
        k = len(self.out_ids)
        if self.max_new <= 0:  # max_new_tokens 0: prefill only, finish without a token
            self.finish = {"type": "length", "length": 0}
            return
        token = (source or self).planned(k)
        # A script may end on its last allowed token; filler text never ends exactly at the limit.
        if token is None and not self.ignore_eos and (self.script is not None or k + 1 < self.max_new):
            self.out_ids.append(tokenizer.EOS_TOKEN_ID)
            if self.pieces is not None:
                self.pieces.append("")
            self.finish = {"type": "stop", "matched": tokenizer.EOS_TOKEN_ID}
            return
        tid, piece = token or tokenizer.output_token(self.seed, k)
        if self.drift and tokenizer.unit(self.seed, k) < self.drift:
            tid, piece = tokenizer.output_token(self.seed + 1 + tid, k)  # a different, still plausible token
        self.out_ids.append(tid)
        self.text += piece
        if self.pieces is not None:
            self.pieces.append(piece)
        for s in self.stop:
            at = self.text.find(s, max(0, len(self.text) - len(piece) - len(s)))
            if at >= 0:
                self.text = self.text[:at]
                self.finish = {"type": "stop", "matched": s}
                return
        if len(self.out_ids) >= self.max_new:
            self.finish = {"type": "length", "length": self.max_new}
