"""Reasoning through the server's ``--reasoning-parser``: ``reasoning_content`` apart from ``content``.

Seen after upgrades: the parser left ``<think>`` in ``content`` and ``reasoning_content`` empty
(sglang#22637), or returned ``content: null`` (sglang PR 20789).
"""

from __future__ import annotations

from pytest_sglang.correctness.context import CheckContext
from pytest_sglang.correctness.openai_checks import ask, mode
from pytest_sglang.correctness.result import CheckReport, excerpt

THINK_TAGS = ("<think>", "</think>")
QUESTION = "Think it through, then answer: what is 12 + 30?"
MAX_TOKENS = 512


def check_reasoning(ctx: CheckContext, stream: bool) -> CheckReport:
    ctx.features.need_reasoning_parser()
    report = CheckReport(f"reasoning separated ({mode(stream)}, parser {ctx.features.reasoning_parser})")
    for i in range(ctx.settings.samples):
        body = ctx.body("chat", i, messages=[{"role": "user", "content": f"{QUESTION} ({i})"}], max_tokens=MAX_TOKENS)
        a = ask(ctx, "chat", body, stream=stream)
        report.problems += [f"request {i}: {p}" for p in a.problems]
        c = a.choice(0)
        report.expect(bool(c.reasoning.strip()), f"request {i}: reasoning_content is empty; content "
                                                 f"{excerpt(c.text)}")
        leaked = [t for t in THINK_TAGS if t in c.text]
        report.expect(not leaked, f"request {i}: content carries {', '.join(leaked)}: {excerpt(c.text)}")
        report.expect(not c.content_null, f"request {i}: content is null")
        if c.finish_reason == "stop":  # a finished answer has an answer after its reasoning
            report.expect(bool(c.text.strip()), f"request {i}: content is empty after the reasoning")
    return report
