"""Speculative-decoding acceptance as SGLang reports it per request: a small sample of ``/generate`` calls.

0.5.23 adds the speculative fields to the ``meta_info`` of a *finished* request only
(``tokenizer_manager._calculate_spec_decoding_metrics``): ``spec_verify_ct`` (verify steps),
``spec_accept_length`` (``completion_tokens / spec_verify_ct``), ``spec_accept_rate`` (accepted /
proposed drafts), ``spec_num_correct_drafts``, ``spec_num_proposed_drafts`` and
``spec_correct_drafts_histogram``. The load generator's streams do not keep them, so the gate sends
``samples`` non-streaming requests (a few at a time) and reads them here.

A context-length bucket sends ``input_ids`` of that many tokens (a shifted cycle of ids from [10, 60),
which every model's vocabulary holds, so no id can crash a server); a DP rank is sampled by pinning
the requests to it with 0.5.23's ``routed_dp_rank`` (refused with a 400 outside ``[0, dp_size)``).
"""

from __future__ import annotations

import concurrent.futures
from dataclasses import dataclass, field

import httpx

from pytest_sglang.server.members import Handle

__all__ = ["SpecSample", "context_ids", "sample_acceptance"]

_PARALLEL = 4
#: Prompts whose continuations a drafter can guess (repetition helps n-gram drafting, as in real text).
_PROMPTS = ("Count from one to fifty in words: one, two, three,", "Write a short story about a lighthouse keeper.",
            "List the months of the year, then the days of the week.", "Explain how a hash map works.")


@dataclass
class SpecSample:
    """Per-request acceptance figures (requests without the fields are counted, not averaged)."""

    lengths: list[float] = field(default_factory=list)
    rates: list[float] = field(default_factory=list)
    tokens: int = 0
    verify_steps: int = 0
    histogram: list[int] = field(default_factory=list)
    missing: int = 0
    failed: list[str] = field(default_factory=list)
    #: ``meta_info.prompt_tokens`` as the server counted them
    prompt_tokens: list[int] = field(default_factory=list)

    @property
    def mean_length(self) -> float | None:
        """Accepted tokens per verify step over all sampled requests (SGLang's own average)."""
        return self.tokens / self.verify_steps if self.verify_steps else None

    @property
    def mean_rate(self) -> float | None:
        return sum(self.rates) / len(self.rates) if self.rates else None

    def add(self, meta: dict[str, object]) -> None:
        verify, completion = meta.get("spec_verify_ct"), meta.get("completion_tokens")
        prompt = meta.get("prompt_tokens")
        if isinstance(prompt, int):
            self.prompt_tokens.append(prompt)
        if not isinstance(verify, int) or verify <= 0 or not isinstance(completion, int):
            self.missing += 1
            return
        self.verify_steps += verify
        self.tokens += completion
        length, rate = meta.get("spec_accept_length"), meta.get("spec_accept_rate")
        self.lengths.append(float(length) if isinstance(length, (int, float)) else completion / verify)
        if isinstance(rate, (int, float)):
            self.rates.append(float(rate))
        hist = meta.get("spec_correct_drafts_histogram")
        for i, n in enumerate(hist if isinstance(hist, list) else ()):
            if len(self.histogram) <= i:
                self.histogram.extend([0] * (i + 1 - len(self.histogram)))
            self.histogram[i] += int(n) if isinstance(n, int) else 0

    def distribution(self) -> str:
        """``min 1.00 / p50 2.95 / max 3.40 over 16 requests; steps by accepted drafts: 0: 12%, 1: 20%, ...``."""
        if not self.lengths:
            return f"no request reported spec_verify_ct ({self.missing} without it)"
        ordered = sorted(self.lengths)
        mid = ordered[len(ordered) // 2]
        text = (f"spec_accept_length per request: min {ordered[0]:.2f} / median {mid:.2f} / max {ordered[-1]:.2f} "
                f"over {len(ordered)} requests")
        total = sum(self.histogram)
        if total:
            text += "; verify steps by accepted drafts: " + ", ".join(
                f"{i}: {n / total:.0%}" for i, n in enumerate(self.histogram))
        return text


#: Ids of a context-length prompt: every model has them (the tiny test models have 401 tokens).
_ID_LOW, _ID_SPAN = 10, 50


def context_ids(length: int, index: int) -> list[int]:
    """``length`` prompt ids, distinct per ``index`` (a shifted cycle, so no two samples share a prefix)."""
    return [_ID_LOW + (k * 7 + index * 13 + k // _ID_SPAN) % _ID_SPAN for k in range(length)]


def _one(client: httpx.Client, index: int, output_len: int, input_len: int | None,
         rank: int | None) -> dict[str, object] | str:
    body: dict[str, object] = {"sampling_params": {"max_new_tokens": output_len, "ignore_eos": True,
                                                   "temperature": 0}}
    if input_len is None:
        body["text"] = _PROMPTS[index % len(_PROMPTS)] + f" ({index})"
    else:
        body["input_ids"] = context_ids(input_len, index)
    if rank is not None:
        body["routed_dp_rank"] = rank
    try:
        response = client.post("/generate", json=body)
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}"
    if response.status_code != 200:
        return f"HTTP {response.status_code} {response.text[:120]!r}"
    try:
        meta = response.json().get("meta_info")
    except (ValueError, AttributeError):
        return "not a JSON object"
    return meta if isinstance(meta, dict) else "no meta_info"


def sample_acceptance(server: Handle, *, samples: int, output_len: int, timeout_s: float,
                      input_len: int | None = None, rank: int | None = None) -> SpecSample:
    """Send ``samples`` greedy ``/generate`` requests (``output_len`` tokens each) and collect acceptance.

    ``input_len``: prompts of that many token ids (else short text prompts); ``rank``: pinned to that DP rank.
    """
    out = SpecSample()
    with server.client(timeout=httpx.Timeout(timeout_s, connect=5.0)) as client, \
            concurrent.futures.ThreadPoolExecutor(_PARALLEL) as pool:
        for result in pool.map(lambda i: _one(client, i, output_len, input_len, rank), range(samples)):
            if isinstance(result, str):
                out.failed.append(result)
            else:
                out.add(result)
    return out
