"""Prompts the checks send: short, varied, in plain English, so any model continues them."""

from __future__ import annotations

import httpx

from pytest_sglang.correctness import http
from pytest_sglang.correctness.result import CheckFailed, CheckReport

PROMPTS: tuple[str, ...] = (
    "The capital of France is",
    "Once upon a time, in a small village by the sea,",
    "The three primary colors are",
    "To make a cup of tea, first",
    "The quick brown fox",
    "In 1969, the first people to walk on the moon",
    "A good way to learn a new language is",
    "The largest planet in our solar system is",
    "Water boils at a temperature of",
    "My favourite book is about",
    "The train left the station at noon and",
    "Photosynthesis is the process by which",
    "The best thing about summer is",
    "An apple a day",
    "The history of the printing press begins",
    "If you mix red and blue paint, you get",
)


def prompt(i: int) -> str:
    """The ``i``-th prompt (cycling; a suffix keeps prompts distinct past the list's end)."""
    base = PROMPTS[i % len(PROMPTS)]
    return base if i < len(PROMPTS) else f"{base} (variant {i // len(PROMPTS)})"


def seed_token_ids(client: httpx.Client, count: int, length: int, *, timeout_s: float,
                   one_by_one: bool = False) -> list[list[int]]:
    """``count`` token-id sequences of ``length`` valid ids: greedy continuations of :data:`PROMPTS`.

    The KL and context-length checks send token ids (``input_ids``): ids the model itself wrote are
    valid for its vocabulary, whatever the tokenizer. ``one_by_one``: one request per prompt (a gateway
    takes no list of prompts).
    """
    sampling = {"max_new_tokens": length, "temperature": 0, "ignore_eos": True}
    if one_by_one:
        replies = [http.post(client, "/generate", {"text": prompt(i), "sampling_params": sampling},
                             timeout_s=timeout_s) for i in range(count)]
        bad = next((r for r in replies if r.status != 200 or not isinstance(r.body, dict)), None)
        reply = bad if bad is not None else replies[-1]
        items: list[object] | None = [r.body for r in replies] if bad is None else None
    else:
        reply = http.post(client, "/generate", {"text": [prompt(i) for i in range(count)], "sampling_params": sampling},
                          timeout_s=timeout_s)
        items = reply.body if isinstance(reply.body, list) else None
    out = [i.get("output_ids") for i in items or [] if isinstance(i, dict)]
    ids = [list(o) for o in out if isinstance(o, list) and len(o) == length and all(isinstance(t, int) for t in o)]
    if reply.status != 200 or len(ids) != count:
        report = CheckReport("token ids for the check")
        report.problems.append(f"POST /generate for {count} x {length} greedy tokens (ignore_eos): {reply.describe()}")
        raise CheckFailed(report)
    return ids
