"""A prefill-decode fleet answers like a single server: SGLang's own PD parity idea (``pd_parity_kit``).

The same greedy prompts (``max_new_tokens`` 4, ``ignore_eos``, ``top_logprobs_num`` 5, one at a time,
after ``/flush_cache`` on every side) go to a single reference server and through the PD gateway; the
token ids must be equal and, where they agree, each logprob within ``parity_logprob_delta`` (the kit's
0.05). With an accuracy task both sides also run it, and the score through PD must not be
significantly below the reference's (Newcombe's interval of the difference, as the accuracy gate's
baseline). The reference is ``--sglang-pd-reference-url`` when given, else a server the gate launches
with ``sglang_server_factory`` from the fleet's common launch args, without any ``--disaggregation-*``
flag (it must not be a PD worker itself). It must run the PD workers' SGLang version, model, dtype,
quantization and KV dtype (:mod:`.comparable`), or nothing is compared.
"""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from pytest_sglang import ledger
from pytest_sglang.correctness import golden
from pytest_sglang.gates.base import Check, GateOutcome, compare
from pytest_sglang.gates.fleet.pd_roles import GATE, PD_ROLES
from pytest_sglang.gates.load.comparable import MODEL_FIELDS, comparable
from pytest_sglang.gates.registry import GateContext, LockingLoad

if TYPE_CHECKING:
    from pytest_sglang.fleet.handle import SGLangFleet
    from pytest_sglang.server.handle import SGLangServer
    from pytest_sglang.sglang.args import LaunchArgs

__all__ = ["Parity", "reference_args", "reference_server", "run_parity"]

#: Seconds the reference may take to answer its attach probes (it is already running).
ATTACH_TIMEOUT_S = 60.0
REQUEST_TIMEOUT_S = 120.0
_TOKENS_FIX = ("the PD pair answers differently from one server: compare the prefill and decode workers' launch "
               "args with the reference's (dtype, quantization, attention backend, tp), check the KV transfer "
               "(--disaggregation-enable-kv-checksum shows corrupt KV as aborted requests), and read the workers' "
               "logs; exact matching needs --enable-deterministic-inference on every side")
_ACCURACY_FIX = ("the task scores lower through the PD pair than on one server: read the wrong answers above and "
                 "the token parity; a transfer that loses or corrupts KV (failures, checksum mismatches) shows here")
_REFERENCE_FIX = ("give --sglang-pd-reference-url URL (a single SGLang server of the same model and launch args), "
                  "or launch the fleet with --sglang-prefill N --sglang-decode M so the gate can launch the "
                  "reference from the common launch args")


@dataclasses.dataclass(frozen=True)
class Parity:
    """The parity keywords of the marker."""

    prompts: int = 8
    max_new_tokens: int = 4
    logprob_delta: float = 0.05
    task: str | None = None
    num_examples: int = 200
    max_drop: float = 0.0


def reference_args(args: LaunchArgs) -> list[str]:
    """The common launch args without any ``--disaggregation-*`` flag (in any spelling SGLang accepts)."""
    pd = {t.dest for t in args.tokens if t.dest is not None and t.dest.startswith("disaggregation_")}
    return args.without(*pd)


def reference_server(ctx: GateContext) -> tuple[SGLangServer | None, str]:
    """The single server to compare with, and how it was found (or, with None, why there is none)."""
    url = ctx.pd_reference_url
    if url is not None:
        from pytest_sglang.server import attach

        server = attach(url, api_key=ctx.server.api_key, validate=ctx.server.validate, timeout_s=ATTACH_TIMEOUT_S)
        return server, f"--sglang-pd-reference-url {server.server_url}"
    config = ctx.server.config
    if ctx.factory is None or config is None:
        return None, "the fleet was attached and no --sglang-pd-reference-url was given"
    server = ctx.factory(reference_args(config.launch_args))
    return server, f"launched by the gate from the common launch args ({server.url})"


def _reference_is_single(reference: SGLangServer, fleet: SGLangFleet, how: str) -> Check:
    """The reference is not the fleet, nor one of its PD workers: ``disaggregation_mode`` ``null``."""
    if reference.url == fleet.gateway.url or reference.url in {w.url for w in fleet.workers}:
        mode = "the fleet itself"
    else:
        found = reference.info().get("disaggregation_mode")
        mode = found if isinstance(found, str) else repr(found)
    return compare(GATE, "disaggregation_mode of the reference server", mode, "==", "null",
                   source=f"its own GET /server_info; {how}", remedy=_REFERENCE_FIX)


def _flush(servers: list[tuple[str, SGLangServer]]) -> list[str]:
    """``POST /flush_cache`` on each server (so no side answers from an earlier request's cache)."""
    unflushed = []
    for name, server in servers:
        ledger.note_flush()
        try:
            with server.client(timeout=60.0) as client:
                status = client.post("/flush_cache", params={"timeout": 30}).status_code
        except httpx.HTTPError as exc:
            unflushed.append(f"{name}: {type(exc).__name__}")
            continue
        if status != 200:
            unflushed.append(f"{name}: answered {status}")
    return unflushed


def _lock(ctx: GateContext) -> contextlib.AbstractContextManager[None]:
    return ctx.load.lock() if isinstance(ctx.load, LockingLoad) else contextlib.nullcontext()


def _pd_servers(fleet: SGLangFleet) -> list[tuple[str, SGLangServer]]:
    return [(w.name(), w.server) for w in fleet.workers if w.role in PD_ROLES and w.server is not None]


def _token_parity(ctx: GateContext, fleet: SGLangFleet, reference: SGLangServer, parity: Parity,
                  out: GateOutcome) -> None:
    prompts = golden.default_prompts()[:parity.prompts]
    unflushed = _flush([("the reference server", reference)])
    with reference.client() as client:
        doc = golden.record(client, prompts, parity.max_new_tokens, timeout_s=REQUEST_TIMEOUT_S)
    unflushed += _flush(_pd_servers(fleet))
    with ctx.server.client() as client:
        found = golden.measure(client, doc, timeout_s=REQUEST_TIMEOUT_S)
    shape = (f"{found.prompts} greedy prompts x {parity.max_new_tokens} tokens (ignore_eos, top_logprobs_num "
             f"{golden.TOP_LOGPROBS}), one at a time, through the PD gateway and on the reference server")
    out.add(compare(GATE, "prompts_with_equal_token_ids", found.same, ">=", found.prompts, unit="prompts",
                    source=shape, remedy=_TOKENS_FIX))
    where = f" (prompt {found.worst_at[0]}, token {found.worst_at[1]})" if found.worst_at else ""
    out.add(compare(GATE, "max_logprob_delta", found.max_delta, "<=", parity.logprob_delta,
                    keyword="parity_logprob_delta", remedy=_TOKENS_FIX,
                    source=f"the largest |logprob PD - logprob reference| where the token ids agree{where}"))
    first = found.first
    out.context["parity: first divergence"] = (
        "none: every prompt gives the reference's token ids" if first is None else
        f"prompt {first.prompt_index} {first.prompt[:60]!r} at token {first.position}: reference "
        f"{first.golden!r} vs PD {first.actual!r}")
    out.notes += [f"parity: {f}" for f in found.failures]
    if unflushed:
        out.notes.append(f"parity: /flush_cache did not answer 200 on {', '.join(unflushed)}")


def _accuracy_parity(ctx: GateContext, reference: SGLangServer, parity: Parity, out: GateOutcome) -> None:
    from pytest_sglang.accuracy import Harness, evaluate
    from pytest_sglang.gates.correctness.accuracy import evaluate_accuracy

    assert parity.task is not None
    data = Path(ctx.eval_data) if ctx.eval_data is not None else None
    harness = Harness(task=parity.task, num_examples=parity.num_examples, data=data)
    mine = evaluate(ctx.server.server_url, harness, api_key=ctx.server.api_key)
    theirs = evaluate(reference.server_url, harness, api_key=reference.api_key)
    judged = evaluate_accuracy(mine, baseline=theirs.to_json(), baseline_source="the reference server",
                               max_drop=parity.max_drop)
    for check in judged.checks:
        if check.metric == "score_drop_lower_bound":  # the accuracy gate's baseline check, against the reference
            check = dataclasses.replace(check, metric="accuracy_drop_vs_reference", keyword="parity_max_drop",
                                        remedy=_ACCURACY_FIX)
        out.add(dataclasses.replace(check, gate=GATE))
    out.context["parity: accuracy through PD"] = mine.summary()
    out.context["parity: accuracy of the reference"] = theirs.summary()
    if "wrong answers" in judged.context:
        out.context["parity: wrong answers through PD"] = judged.context["wrong answers"]
    out.notes += [f"parity: {n.replace('baseline', 'reference server')}" for n in judged.notes]


def run_parity(ctx: GateContext, fleet: SGLangFleet, parity: Parity, out: GateOutcome) -> None:
    """Token and logprob parity (and, with a task, accuracy parity) against a single reference server."""
    reference, how = reference_server(ctx)
    if reference is None:
        out.add(compare(GATE, "reference_server", None, "==", "a single SGLang server", source=how,
                        remedy=_REFERENCE_FIX))
        return
    single = out.add(_reference_is_single(reference, fleet, how))
    out.context["parity: reference"] = how
    if not single.passed:
        return
    theirs = reference.info()
    same = [out.add(comparable(GATE, server.info(), theirs, here=name, there="the reference server",
                               fields=MODEL_FIELDS, source=how, remedy=_REFERENCE_FIX))
            for name, server in _pd_servers(fleet)]
    if not all(c.passed for c in same):  # answers of another model or number format prove nothing
        return
    with _lock(ctx):
        _token_parity(ctx, fleet, reference, parity, out)
        if parity.task is not None:
            _accuracy_parity(ctx, reference, parity, out)
