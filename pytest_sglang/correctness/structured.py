"""Structured output: every constrained answer parses and matches its constraint.

XGrammar and Outlines once dropped unsupported JSON-Schema keywords silently (sglang#37839), and
mixed batches of constrained and free requests produced gibberish (sglang#2414), so half the requests
here run unconstrained at the same moment. The EBNF grammar has an equivalent regular expression, so
its outputs are checked exactly too.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import jsonschema

from pytest_sglang.correctness.context import ROUTES, CheckContext
from pytest_sglang.correctness.openai_checks import ask
from pytest_sglang.correctness.result import CheckReport, excerpt

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answer": {"type": "string", "enum": ["yes", "no", "maybe"]},
        "confidence": {"type": "integer", "enum": [1, 2, 3, 4, 5]},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}, "maxItems": 3},
    },
    "required": ["answer", "confidence"],
    "additionalProperties": False,
}
REGEX = r"(yes|no), [0-9]{1,3}"
#: xgrammar / llguidance EBNF (GBNF), the same language as :data:`EBNF_AS_REGEX`.
EBNF = 'root ::= ("red" | "green" | "blue") " " digit digit?\ndigit ::= [0-9]'
EBNF_AS_REGEX = r"(red|green|blue) [0-9][0-9]?"
#: Enough room for every allowed answer (the longest JSON is ~70 characters) plus whitespace.
MAX_TOKENS = 128


def _constraint(kind: str) -> dict[str, Any]:
    if kind == "json_schema":
        return {"response_format": {"type": "json_schema", "json_schema": {"name": "verdict", "schema": SCHEMA}}}
    return {"regex": REGEX} if kind == "regex" else {"ebnf": EBNF}


def _problem(kind: str, text: str) -> str | None:
    """Why ``text`` does not satisfy the ``kind`` constraint, or None."""
    if kind != "json_schema":
        pattern = REGEX if kind == "regex" else EBNF_AS_REGEX
        return None if re.fullmatch(pattern, text) else f"does not match {pattern!r}"
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return f"is not JSON ({exc.msg} at {exc.pos})"
    errors = sorted(jsonschema.Draft202012Validator(SCHEMA).iter_errors(value), key=lambda e: list(e.path))
    return None if not errors else "violates the schema: " + "; ".join(
        f"{'/'.join(map(str, e.path)) or '(root)'}: {e.message}" for e in errors[:3])


def check_structured(ctx: CheckContext, kind: str, stream: bool = False) -> CheckReport:
    """``kind`` is ``json_schema``, ``regex`` or ``ebnf``; ``samples`` constrained chat requests."""
    ctx.features.need_grammar(kind)
    report = CheckReport(f"structured output ({kind}{', stream' if stream else ''})")
    samples = ctx.settings.samples
    question = "Is the sky blue? Answer with a verdict and your confidence."

    def constrained(i: int) -> tuple[str, object, list[str]]:
        body = ctx.body("chat", i, messages=[{"role": "user", "content": f"{question} ({i})"}],
                        max_tokens=MAX_TOKENS, **_constraint(kind))
        a = ask(ctx, "chat", body, stream=stream)
        c = a.choice(0)
        return c.text, c.finish_reason, a.problems

    def free(i: int) -> None:
        ctx.post(ROUTES["chat"], ctx.body("chat", i))  # mixed traffic only; its answer is not judged

    with ThreadPoolExecutor(max_workers=min(2 * samples, max(2, ctx.concurrency()))) as pool:
        futures = [pool.submit(constrained, i) for i in range(samples)]
        for i in range(samples):
            pool.submit(free, i)
        results = [f.result(timeout=ctx.settings.request_timeout_s * 3) for f in futures]
    valid = 0
    for i, (text, reason, problems) in enumerate(results):
        report.problems += [f"request {i}: {p}" for p in problems]
        why = _problem(kind, text)
        if why is None:
            valid += 1
            continue
        if reason == "length":
            report.problems.append(f"request {i}: did not finish within max_tokens={MAX_TOKENS} "
                                   f"({excerpt(text)}); a grammar that lets a model write whitespace forever does "
                                   "this (SGLang's --constrained-json-disable-any-whitespace stops it)")
        else:
            report.problems.append(f"request {i}: output {excerpt(text)} {why}")
    report.figures.update({"requests": samples, "valid": valid})
    return report
