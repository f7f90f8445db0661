"""No cross-talk and determinism across batch sizes: greedy ids alone vs in a concurrent batch.

Without ``--enable-deterministic-inference`` a batch may legitimately change a greedy token (float
reductions depend on the batch), so a mismatch alone is not proof of a bug; those checks report a
match rate against a floor. Cross-talk has its own signature, whatever the numerics: a request's
output follows *another* request's output more closely than its own.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from pytest_sglang.correctness.context import CheckContext
from pytest_sglang.correctness.native_checks import generate
from pytest_sglang.correctness.prompts import prompt
from pytest_sglang.correctness.result import CheckReport, excerpt


def greedy_ids(ctx: CheckContext, text: str) -> list[int] | str:
    """The greedy ids for ``text`` (ignore_eos), or the problem that prevented them."""
    answer = generate(ctx, ctx.native(text, ignore_eos=True))
    return "; ".join(answer.problems) if answer.problems else answer.ids


def together(ctx: CheckContext, texts: Sequence[str]) -> list[list[int] | str]:
    """Greedy ids for all ``texts`` sent at the same moment (one thread each, released together)."""
    gate = threading.Barrier(len(texts))

    def one(text: str) -> list[int] | str:
        try:
            gate.wait(timeout=ctx.settings.request_timeout_s)
        except threading.BrokenBarrierError:
            pass  # a thread was late: the requests still overlap, only less tightly
        return greedy_ids(ctx, text)

    with ThreadPoolExecutor(max_workers=len(texts)) as pool:
        futures = [pool.submit(one, t) for t in texts]
        return [f.result(timeout=ctx.settings.request_timeout_s * 2) for f in futures]


def _same_positions(a: Sequence[int], b: Sequence[int]) -> int:
    return sum(x == y for x, y in zip(a, b, strict=False))


def _floor(ctx: CheckContext) -> float:
    return 1.0 if ctx.features.deterministic else ctx.settings.min_match_rate


def check_cross_talk(ctx: CheckContext) -> CheckReport:
    """N concurrent greedy requests each return what the same request returns alone."""
    report = CheckReport("no cross-talk between concurrent requests")
    n = max(2, ctx.concurrency())
    texts = [prompt(i) for i in range(n)]
    alone = [greedy_ids(ctx, t) for t in texts]
    mixed = together(ctx, texts)
    same = 0
    for i, got in enumerate(mixed):
        own = alone[i]
        if isinstance(got, str) or isinstance(own, str):
            report.problems.append(f"request {i}: {got if isinstance(got, str) else own}")
            continue
        if got == own:
            same += 1
            continue
        others = [(j, _same_positions(got, o)) for j, o in enumerate(alone) if j != i and not isinstance(o, str)]
        j, best = max(others, key=lambda t: t[1], default=(-1, -1))
        if best > _same_positions(got, own) and best * 2 >= len(got):
            report.problems.append(f"request {i} got request {j}'s tokens: together {excerpt(got, 100)}, alone "
                                   f"{excerpt(own, 100)}, request {j} alone {excerpt(alone[j], 100)}")
    rate = same / n
    report.figures.update({"concurrent requests": n, "identical": same, "match rate": rate})
    floor = _floor(ctx)
    report.expect(rate >= floor, f"{same}/{n} concurrent outputs equal their solo outputs (rate {rate:.2f} < floor "
                                 f"{floor:g}{'' if ctx.features.deterministic else ', min_match_rate'})")
    return report


def batch_sizes(limit: int) -> list[int]:
    """1, 2, 4, ... up to ``limit`` (and ``limit`` itself)."""
    sizes, n = [], 1
    while n < limit:
        sizes.append(n)
        n *= 2
    return [*sizes, limit]


def check_batch_invariance(ctx: CheckContext) -> CheckReport:
    """One greedy prompt sent in batches of 1, 2, 4, ... gives one output (SGLang's ``test_deterministic``)."""
    report = CheckReport("greedy output identical across batch sizes")
    text = prompt(0)
    reference = greedy_ids(ctx, text)
    if isinstance(reference, str):
        report.problems.append(f"alone: {reference}")
        return report
    outputs: list[list[int]] = []
    for size in batch_sizes(max(2, ctx.concurrency())):
        for got in together(ctx, [text] * size):
            if isinstance(got, str):
                report.problems.append(f"batch of {size}: {got}")
            else:
                outputs.append(got)
    same = sum(o == reference for o in outputs)
    unique = len({tuple(o) for o in outputs} | {tuple(reference)})
    rate = same / len(outputs) if outputs else 0.0
    report.figures.update({"outputs": len(outputs), "unique outputs": unique, "match rate": rate})
    floor = _floor(ctx)
    if ctx.features.deterministic:
        report.expect(unique == 1, f"{unique} different outputs with --enable-deterministic-inference (expected 1)")
    else:
        report.expect(rate >= floor, f"{same}/{len(outputs)} outputs equal the solo output (rate {rate:.2f} < "
                                     f"min_match_rate {floor:g})")
    return report
