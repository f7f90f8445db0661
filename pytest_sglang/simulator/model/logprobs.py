"""Token log-probabilities of the simulated model, in SGLang 0.5.23's three layouts.

The model's logprob of token ``t`` after context ``c`` depends only on the last few ids of ``c``, its
length and ``t``: the same tokens get the same logprobs whether they were generated (output
logprobs) or scored as part of a prompt (input logprobs), and whether their prefix came from the
radix cache or not. That is what SGLang's own KL check compares (flush, prefill, generate with cache
hits, flush, re-score cold). The ``cache-logprob-drift:DELTA`` fault shifts the logprobs a request
serves when part of its prompt came from the cache, as a cache bug would.

Layouts: native ``meta_info`` triples ``[logprob, token_id, text|null]``; chat
``{"content": [{"token", "bytes", "logprob", "top_logprobs": [...]}]}``; completions
``{"text_offset", "token_logprobs", "tokens", "top_logprobs": [{token: logprob}]}``.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

from pytest_sglang.simulator import tokenizer

__all__ = ["chat_logprobs", "completion_logprobs", "native_logprobs", "scored"]

_WINDOW = 4
Triple = list[Any]  # [logprob, token id, text | None]


def token_logprob(context: Sequence[int], token: int) -> float:
    """The model's logprob of ``token`` after ``context`` (in (-2.02, -0.02])."""
    key = f"{len(context)}|{','.join(map(str, context[-_WINDOW:]))}|{token}"
    return -0.02 - 2.0 * (zlib.crc32(key.encode()) / 2**32)


def _alternatives(context: Sequence[int], token: int, lp: float, k: int) -> list[tuple[float, int, str]]:
    """The top-``k`` list at this position: the actual token first, then lower-ranked others."""
    out = [(lp, token, "")]
    h = zlib.crc32(f"alt|{len(context)}|{','.join(map(str, context[-_WINDOW:]))}".encode())
    seen = {token}
    for j in range(len(tokenizer.VOCAB)):  # at most the vocabulary: a huge k costs no more
        if len(out) >= k:
            break
        tid, text = tokenizer.VOCAB[(h + 37 * j) % len(tokenizer.VOCAB)]
        if tid not in seen:
            seen.add(tid)
            out.append((lp - 0.4 - 0.6 * len(out), tid, text))
    return out


def scored(
    ids: Sequence[int], start: int, texts: Sequence[str | None], *, top: int, shift: float
) -> list[tuple[float | None, int, str | None, list[tuple[float, int, str]]]]:
    """(logprob, id, text, top list) for ``ids[start:]``; position 0 has no context (logprob None)."""
    out: list[tuple[float | None, int, str | None, list[tuple[float, int, str]]]] = []
    for i in range(start, len(ids)):
        text = texts[i - start] if i - start < len(texts) else None
        if i == 0:
            out.append((None, ids[i], text, []))
            continue
        lp = token_logprob(ids[:i], ids[i]) + shift
        alts = _alternatives(ids[:i], ids[i], lp, top) if top else []
        out.append((lp, ids[i], text, [(a, t, (text or "") if t == ids[i] else s) for a, t, s in alts]))
    return out


def native_logprobs(
    prompt: Sequence[int],
    output: Sequence[int],
    texts: Sequence[str],
    *,
    start: int,
    top: int,
    with_text: bool,
    shift: float,
) -> dict[str, Any]:
    """The logprob fields of a /generate ``meta_info`` (``return_logprob``), in 0.5.23's key order.

    ``start`` is ``logprob_start_len`` (-1: no input logprobs); 0.5.23 reports the first scored
    prompt position with a null logprob.
    """
    full = list(prompt) + list(output)
    out_rows = scored(full, len(prompt), texts, top=top, shift=shift)

    def triple(lp: float | None, tid: int, text: str | None) -> Triple:
        return [lp, tid, text if with_text else None]

    inputs: list[Triple] = []
    input_tops: list[Any] = []
    if start >= 0 and start < len(prompt):
        rows = scored(prompt, start, [], top=top, shift=shift)
        rows[0] = (None, rows[0][1], rows[0][2], [])
        inputs = [triple(lp, tid, None) for lp, tid, _, _ in rows]
        input_tops = [
            None if i == 0 else [triple(a, t, None) for a, t, _ in alts] for i, (_, _, _, alts) in enumerate(rows)
        ]
    fields: dict[str, Any] = {
        "input_token_logprobs": inputs,
        "output_token_logprobs": [triple(lp, tid, text) for lp, tid, text, _ in out_rows],
        "output_token_logprobs_length": len(out_rows),
    }
    if top:
        fields["input_top_logprobs"] = input_tops
        fields["output_top_logprobs"] = [[triple(a, t, s) for a, t, s in alts] for _, _, _, alts in out_rows]
    return fields


def chat_logprobs(rows: list[tuple[float | None, int, str | None, list[tuple[float, int, str]]]]) -> dict[str, Any]:
    """``choices[i].logprobs`` of a chat completion (``logprobs: true``, ``top_logprobs: k``)."""

    def entry(text: str, lp: float | None) -> dict[str, Any]:
        return {"token": text, "bytes": list(text.encode()), "logprob": lp}

    return {
        "content": [
            {**entry(text or "", lp), "top_logprobs": [entry(s, a) for a, _, s in alts]} for lp, _, text, alts in rows
        ]
    }


def completion_logprobs(
    rows: list[tuple[float | None, int, str | None, list[tuple[float, int, str]]]],
) -> dict[str, Any]:
    """``choices[i].logprobs`` of a completion (``logprobs: k``); 0.5.23 sends text_offset -1."""
    return {
        "text_offset": [-1] * len(rows),
        "token_logprobs": [lp for lp, _, _, _ in rows],
        "tokens": [text or "" for _, _, text, _ in rows],
        "top_logprobs": [{s: a for a, _, s in alts} for _, _, _, alts in rows],
    }
