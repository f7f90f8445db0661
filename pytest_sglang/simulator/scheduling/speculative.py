"""Speculative decoding (``--speculative-algorithm EAGLE|EAGLE3|NEXTN|NGRAM|STANDALONE``), as 0.5.23 reports it.

Each decode step drafts ``speculative_num_draft_tokens - 1`` tokens and verifies them in one forward
pass: the request gains the accepted drafts plus one bonus token. Drafts are accepted one after the
other with a per-draft probability that depends on the algorithm (a draft model predicts better than
an n-gram table), so the accepted count per step is a truncated geometric draw. A step costs more
than a plain decode step: the draft passes (``speculative_num_steps``) and the wider verify.

What 0.5.23 reports, read against its code:

* per finished request, ``meta_info`` (``tokenizer_manager._calculate_spec_decoding_metrics``):
  ``spec_verify_ct`` (verify steps), ``spec_num_correct_drafts``, ``spec_num_proposed_drafts``
  (``verify_ct x (num_draft_tokens - 1)``), ``spec_accept_rate`` (correct / proposed),
  ``spec_accept_length`` (``completion_tokens / verify_ct``: the prefill's token counts, as there)
  and ``spec_correct_drafts_histogram`` (steps by number of accepted drafts);
* ``/metrics``: the gauges ``sglang:spec_accept_length`` and ``sglang:spec_accept_rate`` (the last
  decode batch, ``mostrecent``) and the counter ``sglang:spec_verify_calls_total``;
* ``/server_info`` ``internal_states[i].avg_spec_accept_length``: accepted tokens / verify steps since
  the start.

Faults (:mod:`~pytest_sglang.simulator.failures.production`): ``spec-collapse`` accepts no draft (length 1.00, each step still
pays for the drafts); ``spec-slow`` keeps the acceptance but makes each step cost as much as the
tokens it yields (no speedup); ``spec-decay-after:TOKENS`` accepts each draft with probability
:data:`LOW_ACCEPT_P` once the request's context (prompt + generated) passes TOKENS; ``spec-rank-low:K``
does so for the requests on DP rank K (pinned by ``routed_dp_rank``, else dealt round-robin), and
``/server_info`` then reports each rank's own ``avg_spec_accept_length``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from pytest_sglang.simulator.config import SimConfig
from pytest_sglang.simulator.scheduling.request import Request

__all__ = ["ALGORITHMS", "Speculation", "from_config", "meta_fields", "server_info_fields"]

#: Per-draft acceptance probability of each algorithm on the simulated model.
ALGORITHMS = {"EAGLE": 0.7, "EAGLE3": 0.8, "NEXTN": 0.75, "STANDALONE": 0.6, "NGRAM": 0.45}
#: Extra cost of one draft pass (a draft model's layer), and of each extra verified position.
_DRAFT_PASS_COST = 0.08
_VERIFY_COST = 0.03
_KEY = "spec"  # Request.extra key of the per-request counters
#: A draft's acceptance probability under the decay and low-rank faults (accept length about 1.2 with 3
#: drafts; sglang#30763 saw an accept rate of 0.19 beyond 32K tokens).
LOW_ACCEPT_P = 0.15


@dataclass
class _Counters:
    drafts: int
    rank: int = 0
    verify_ct: int = 0
    correct: int = 0
    histogram: list[int] = field(default_factory=list)


@dataclass
class Speculation:
    algorithm: str
    num_steps: int
    topk: int
    draft_tokens: int
    accept_p: float
    slow: bool = False
    #: faults: the context length beyond which drafts are rarely accepted; the DP rank that rarely accepts
    decay_after: int | None = None
    low_rank: int | None = None
    dp_size: int = 1
    rng: random.Random = field(default_factory=random.Random)
    #: since the start, for avg_spec_accept_length and spec_verify_calls_total
    verify_total: int = 0
    tokens_total: int = 0
    #: the last decode batch, for the mostrecent gauges
    last_length: float = 0.0
    last_rate: float = 0.0
    _batch: list[int] = field(default_factory=lambda: [0, 0, 0])  # verifies, tokens, correct drafts
    #: per DP rank since the start: [verify steps, tokens]
    per_rank: dict[int, list[int]] = field(default_factory=dict)
    _next_rank: int = 0

    @property
    def drafts(self) -> int:
        return max(0, self.draft_tokens - 1)

    def expected_length(self) -> float:
        return 1 + sum(self.accept_p ** i for i in range(1, self.drafts + 1))

    def step_cost(self) -> float:
        """A verify step's time over a plain decode step's."""
        if self.slow:  # the fault: what is gained per step is lost in step time
            return self.expected_length()
        passes = 0 if self.algorithm == "NGRAM" else max(1, self.num_steps)
        return 1 + _DRAFT_PASS_COST * passes + _VERIFY_COST * self.drafts

    def draw(self, req: Request | None = None) -> int:
        """Drafts accepted in one step: each in turn with ``accept_p`` (this request's), until one is rejected."""
        p = self.accept_p if req is None else self._accept_p(req)
        n = 0
        while n < self.drafts and self.rng.random() < p:
            n += 1
        return n

    def _counters(self, req: Request) -> _Counters:
        counters = req.extra.get(_KEY)
        if not isinstance(counters, _Counters):
            rank = req.routed_dp_rank
            if rank is None:  # 0.5.23's default round-robin balancer
                rank, self._next_rank = self._next_rank % max(1, self.dp_size), self._next_rank + 1
            counters = req.extra[_KEY] = _Counters(self.drafts, rank)
        return counters

    def _accept_p(self, req: Request) -> float:
        if self.low_rank is not None and self._counters(req).rank == self.low_rank:
            return min(self.accept_p, LOW_ACCEPT_P)
        context = len(req.prompt_ids) + len(req.out_ids)
        if self.decay_after is not None and context > self.decay_after:
            return min(self.accept_p, LOW_ACCEPT_P)
        return self.accept_p

    def begin_batch(self) -> None:
        self._batch = [0, 0, 0]

    def verified(self, req: Request, produced: int) -> None:
        """One verify step of ``req`` that produced ``produced`` tokens (accepted drafts + bonus)."""
        counters = self._counters(req)
        mine = self.per_rank.setdefault(counters.rank, [0, 0])
        mine[0] += 1
        mine[1] += produced
        correct = max(0, produced - 1)
        counters.verify_ct += 1
        counters.correct += correct
        if len(counters.histogram) <= correct:
            counters.histogram.extend([0] * (correct + 1 - len(counters.histogram)))
        counters.histogram[correct] += 1
        self.verify_total += 1
        self.tokens_total += produced
        self._batch[0] += 1
        self._batch[1] += produced
        self._batch[2] += correct

    def end_batch(self) -> None:
        verifies, tokens, correct = self._batch
        if verifies:
            self.last_length = tokens / verifies
            self.last_rate = correct / (verifies * self.drafts) if self.drafts else 0.0


def _int(value: object, default: int) -> int:
    try:
        return int(str(value)) if value is not None else default
    except ValueError:
        return default


def from_config(cfg: SimConfig) -> Speculation | None:
    """The speculation of this launch (None without ``--speculative-algorithm``)."""
    extra = cfg.args.passthrough
    algorithm = str(extra.get("speculative_algorithm") or "").upper()
    if not algorithm:
        return None
    steps = _int(extra.get("speculative_num_steps"), 0 if algorithm == "NGRAM" else 3)
    topk = _int(extra.get("speculative_eagle_topk"), 10 if algorithm == "NGRAM" else 1)
    # 0.5.23 with topk 1: num_draft_tokens = num_steps + 1 unless given
    draft = _int(extra.get("speculative_num_draft_tokens"), steps + 1 if algorithm != "NGRAM" else 4)
    faults = cfg.faults.production
    p = 0.0 if faults.spec_collapse else ALGORITHMS.get(algorithm, 0.6)
    return Speculation(algorithm, steps, topk, max(1, draft), p, slow=faults.spec_slow,
                       decay_after=faults.spec_decay_after, low_rank=faults.spec_rank_low, dp_size=cfg.args.dp_size,
                       rng=random.Random(cfg.random_seed))


def meta_fields(req: Request, completion_tokens: int) -> dict[str, Any]:
    """The finished request's ``meta_info`` speculative fields (none before its first verify step)."""
    counters = req.extra.get(_KEY)
    if not isinstance(counters, _Counters) or counters.verify_ct <= 0:
        return {}
    proposed = counters.verify_ct * counters.drafts
    if proposed <= 0:
        return {}
    return {
        "spec_accept_rate": counters.correct / proposed,
        "spec_accept_length": completion_tokens / counters.verify_ct,
        "spec_num_correct_drafts": counters.correct,
        "spec_num_proposed_drafts": proposed,
        "spec_verify_ct": counters.verify_ct,
        "spec_correct_drafts_histogram": list(counters.histogram),
    }


def server_info_fields(spec: Speculation, rank: int) -> dict[str, Any]:
    """``internal_states[rank]`` fields: that rank's average since the start (absent before its first verify)."""
    verifies, tokens = spec.per_rank.get(rank, (0, 0))
    if verifies <= 0:
        return {}
    return {"avg_spec_accept_length": tokens / verifies}
