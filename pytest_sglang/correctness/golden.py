"""Golden outputs: record greedy token ids and logprobs from a known-good server, compare another with them.

The promotion check "the new configuration answers like production", with no dataset: the same
prompts, greedy, a fixed number of tokens (``ignore_eos``), one request at a time (batch size 1 on
both sides, so batch-dependent numerics do not differ between recording and check). The comparison
gives the exact-match rate of the token ids, the first divergence (prompt, position, both
continuations) and the largest logprob difference over the tokens both agree on.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from pytest_sglang.accuracy.arithmetic import generate as arithmetic_examples
from pytest_sglang.correctness import http
from pytest_sglang.correctness.payload import as_dict, as_list
from pytest_sglang.correctness.prompts import PROMPTS
from pytest_sglang.correctness.result import CheckReport, excerpt
from pytest_sglang.errors import ConfigError, ServerUnavailable
from pytest_sglang.files import DEFAULT_CAP, MiB, read_capped, read_capped_text

FORMAT = "pytest-sglang-golden/1"
DEFAULT_TOKENS = 32
TOP_LOGPROBS = 5
#: Continuation tokens shown on each side of a divergence.
SHOWN_TOKENS = 8
MAX_FILE_BYTES = DEFAULT_CAP
#: Each prompt is asked one at a time for every greedy token: a few MiB of prompts is already hours.
MAX_PROMPTS_BYTES = 16 * MiB


def default_prompts() -> list[str]:
    """The shipped prompt set: the suite's English prompts and eight arithmetic questions."""
    return [*PROMPTS, *(f"Question: {e.question}\nAnswer:" for e in arithmetic_examples(8, seed=42))]


@dataclass
class Generation:
    prompt: str
    ids: list[int]
    pieces: list[str]
    logprobs: list[float]
    top: list[list[list[float]]] = field(default_factory=list)  # per position: [[logprob, id], ...]

    def to_json(self) -> dict[str, Any]:
        return {"prompt": self.prompt, "output_ids": self.ids, "pieces": self.pieces, "logprobs": self.logprobs,
                "top_logprobs": self.top}


def _generation(prompt: str, body: dict[str, Any]) -> Generation:
    meta = as_dict(body.get("meta_info"))
    entries = [e for e in as_list(meta.get("output_token_logprobs")) if isinstance(e, list) and len(e) >= 2]
    top = [[[float(t[0]), float(t[1])] for t in as_list(row) if isinstance(t, list) and len(t) >= 2
            and isinstance(t[0], (int, float)) and isinstance(t[1], int)]
           for row in as_list(meta.get("output_top_logprobs"))]
    ids = [i for i in as_list(body.get("output_ids")) if isinstance(i, int)]
    return Generation(prompt, ids, [e[2] if len(e) > 2 and isinstance(e[2], str) else "" for e in entries],
                      [float(e[0]) if isinstance(e[0], (int, float)) else float("nan") for e in entries], top)


def generate(client: httpx.Client, prompt: str, tokens: int, *, timeout_s: float) -> Generation | str:
    """The greedy ``tokens``-token answer with logprobs, or what went wrong."""
    body = {"text": prompt, "sampling_params": {"max_new_tokens": tokens, "temperature": 0, "ignore_eos": True},
            "return_logprob": True, "top_logprobs_num": TOP_LOGPROBS, "return_text_in_logprobs": True}
    reply = http.post(client, "/generate", body, timeout_s=timeout_s)
    gen = _generation(prompt, reply.obj())
    if reply.status != 200 or len(gen.ids) != tokens or len(gen.logprobs) != tokens:
        return f"no {tokens}-token greedy answer with logprobs for {excerpt(prompt, 60)}: {reply.describe()}"
    return gen


def record(client: httpx.Client, prompts: Sequence[str], tokens: int = DEFAULT_TOKENS, *,
           timeout_s: float = 120.0, server: dict[str, Any] | None = None) -> dict[str, Any]:
    """The golden document for ``prompts`` (write it with :func:`save`)."""
    if not prompts:
        raise ConfigError("prompts", "[]", "is empty", "pass at least one prompt")
    generations = []
    for prompt in prompts:
        gen = generate(client, prompt, tokens, timeout_s=timeout_s)
        if isinstance(gen, str):
            raise ServerUnavailable(f"golden record: {gen}\nFix: record from a healthy server that serves native "
                                    "/generate with logprobs.")
        generations.append(gen)
    return {"format": FORMAT, "server": server or {}, "tokens": tokens, "top_logprobs": TOP_LOGPROBS,
            "records": [g.to_json() for g in generations]}


def save(doc: dict[str, Any], path: Path) -> None:
    path.write_text(json.dumps(doc, indent=1) + "\n")


_RECORD_FIX = "record one with: python -m pytest_sglang golden record --url URL --out FILE"


def load(path: Path, option: str = "golden file") -> dict[str, Any]:
    """A recording written by :func:`save`; errors name ``option``, the path and the fix."""
    if not Path(path).exists():  # a wrong path, most often: say where it was looked for, not "record one"
        where = f"{Path(path).absolute()}; a relative path is read from {Path.cwd()}"
        raise ConfigError(option, str(path), f"does not exist ({where})",
                          "pass the recording's path (absolute, or relative to that directory); if you have no "
                          "recording yet, " + _RECORD_FIX)
    raw = read_capped(path, option=option, cap=MAX_FILE_BYTES, fix=_RECORD_FIX,
                      too_large_fix="pass a file written by golden record (a few hundred kB)")
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise ConfigError(option, str(path), f"cannot be read as JSON ({exc})", _RECORD_FIX) from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("records"), list):
        raise ConfigError(option, str(path), f"is not a {FORMAT} document", _RECORD_FIX)
    return doc


def read_prompts(path: Path, option: str = "--prompts") -> list[str]:
    """Prompts from a file: JSON lines with a ``prompt`` field, or one prompt per line."""
    text = read_capped_text(path, option=option, cap=MAX_PROMPTS_BYTES, fix="pass a text file",
                            too_large_fix="pass the prompts to record (one per line), not a corpus")
    out = []
    for line in filter(str.strip, text.splitlines()):
        try:
            row = json.loads(line)
        except ValueError:
            row = line
        out.append(str(row.get("prompt")) if isinstance(row, dict) else line)
    return out


@dataclass(frozen=True)
class Divergence:
    prompt_index: int
    prompt: str
    position: int
    golden: str  # the recorded continuation from the divergence
    actual: str


def _continuation(pieces: Sequence[str], ids: Sequence[int], at: int) -> str:
    shown = pieces[at:at + SHOWN_TOKENS] if any(pieces) else [f"<{i}>" for i in ids[at:at + SHOWN_TOKENS]]
    return "".join(shown)


def _divergence(want: Sequence[int], got: Sequence[int]) -> int | None:
    """The first position where the ids differ (a shorter list diverges where it ends), or None."""
    at = next((k for k, (a, b) in enumerate(zip(want, got, strict=False)) if a != b), None)
    return at if at is not None or len(want) == len(got) else min(len(want), len(got))


@dataclass
class _Tally:
    same: int = 0
    first: Divergence | None = None
    worst: tuple[float, int, int] = (0.0, -1, -1)  # (|delta|, prompt, position)
    failures: list[str] = field(default_factory=list)

    def add(self, n: int, rec: dict[str, Any], got: Generation) -> None:
        want_ids = [i for i in as_list(rec.get("output_ids")) if isinstance(i, int)]
        want_lp = [float(v) for v in as_list(rec.get("logprobs")) if isinstance(v, (int, float))]
        at = _divergence(want_ids, got.ids)
        self.same += at is None
        if at is not None and self.first is None:
            pieces = [str(p) for p in as_list(rec.get("pieces"))]
            self.first = Divergence(n, got.prompt, at, _continuation(pieces, want_ids, at),
                                    _continuation(got.pieces, got.ids, at))
        agreed = len(want_ids) if at is None else at  # logprobs compare only where the tokens agree
        for k in range(min(len(want_lp), len(got.logprobs), agreed)):
            delta = abs(got.logprobs[k] - want_lp[k])
            if delta > self.worst[0]:
                self.worst = (delta, n, k)


@dataclass(frozen=True)
class Comparison:
    """What re-running a recording measured (no verdict: :func:`compare` and the gate judge it)."""

    prompts: int
    same: int  # prompts whose greedy token ids equal the recording's
    first: Divergence | None
    max_delta: float  # the largest logprob difference where the tokens agree
    worst_at: tuple[int, int] | None  # (prompt, position) of that difference
    failures: tuple[str, ...]  # prompts that could not be compared (failed requests)

    @property
    def rate(self) -> float:
        """The exact-match rate of token ids."""
        return self.same / self.prompts if self.prompts else 0.0

    def first_text(self) -> str | None:
        """``prompt 0 'The capital ...' at token 3: recorded '...' vs now '...'``, or None."""
        first = self.first
        if first is None:
            return None
        return (f"prompt {first.prompt_index} {excerpt(first.prompt, 60)} at token {first.position}: "
                f"recorded {first.golden!r} vs now {first.actual!r}")


def measure(client: httpx.Client, doc: dict[str, Any], *, timeout_s: float = 120.0) -> Comparison:
    """Re-run the recorded prompts one at a time and compare the answers with the recording."""
    records = [as_dict(r) for r in as_list(doc.get("records"))]
    raw_tokens = doc.get("tokens")
    tokens = raw_tokens if isinstance(raw_tokens, int) else DEFAULT_TOKENS
    tally = _Tally()
    for n, rec in enumerate(records):
        got = generate(client, str(rec.get("prompt", "")), tokens, timeout_s=timeout_s)
        if isinstance(got, str):
            tally.failures.append(f"prompt {n}: {got}")
        else:
            tally.add(n, rec, got)
    delta, worst_prompt, worst_at = tally.worst
    return Comparison(len(records), tally.same, tally.first, delta,
                      (worst_prompt, worst_at) if worst_prompt >= 0 else None, tuple(tally.failures))


def compare(client: httpx.Client, doc: dict[str, Any], *, min_match: float = 1.0,
            max_logprob_delta: float | None = None, timeout_s: float = 120.0) -> CheckReport:
    """Re-run the recorded prompts and judge the server against the golden document."""
    report = CheckReport("golden outputs")
    found = measure(client, doc, timeout_s=timeout_s)
    report.problems.extend(found.failures)
    report.figures.update({"prompts": found.prompts, "exact matches": found.same, "match rate": found.rate,
                           "max logprob delta": found.max_delta})
    if found.first is not None:
        report.figures["first divergence"] = f"prompt {found.first.prompt_index} token {found.first.position}"
    if found.rate < min_match:
        where = f"; first divergence: {found.first_text()}" if found.first else ""
        report.problems.append(f"{found.same}/{found.prompts} prompts give the recorded token ids (rate "
                               f"{found.rate:.3f} < min_match {min_match:g}){where}")
    if max_logprob_delta is not None and found.max_delta > max_logprob_delta and found.worst_at is not None:
        report.problems.append(f"a logprob differs by {found.max_delta:.4f} > max_logprob_delta "
                               f"{max_logprob_delta:g} (prompt {found.worst_at[0]}, token {found.worst_at[1]}, "
                               "where the tokens agree)")
    return report
