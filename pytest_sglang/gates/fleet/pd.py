"""``@pytest.mark.sglang_pd(...)``: a prefill-decode fleet is a real pair, moves its KV and answers like one server.

SGLang's gateway in PD mode (``--pd-disaggregation --prefill URL PORT --decode URL``) sends each request
to one prefill and one decode worker and returns the decode worker's answer. Its failures are quiet:
it pairs two workers that are not PD workers at all, a missing RDMA device makes the transfer fall
back to TCP, and on a bad network every transfer fails. The checks, in the order of the message:

* **roles** (always): every worker's own ``/server_info`` ``disaggregation_mode`` is the role the
  gateway gave it, and each prefill worker's ``disaggregation_bootstrap_port`` is the one the gateway
  sends decode workers to (:mod:`.pd_roles`);
* ``transfer_backend="mooncake"``: the KV transfer backend of every worker; ``kv_checksum=True``: the
  KV checksum is on everywhere;
* **transfer under load** (``load=True``, the default; the ``sglang_throughput`` load keywords): a load
  through the gateway, then transfer and bootstrap failures from the workers' ``/metrics`` (none
  allowed unless ``max_*_failures``/``max_*_failure_rate`` say otherwise), the clients' errors
  (``max_error_rate``), and the transfer's share of TTFT, reported, or judged with
  ``max_transfer_share`` / ``max_transfer_ms`` (:mod:`.pd_transfer`);
* **parity** (``parity=True``): the same greedy prompts through PD and on a single reference server
  (``--sglang-pd-reference-url``, else launched by the gate): equal token ids, logprobs within
  ``parity_logprob_delta``; with ``parity_accuracy=True`` or a ``task``, the accuracy through PD is not
  significantly below the reference's (:mod:`.pd_parity`).

On a single server, or a gateway whose workers are not prefill/decode workers, the gate fails ("needs a
prefill-decode fleet").
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Annotated

from pytest_sglang.accuracy import TASKS
from pytest_sglang.fleet.handle import fleet_of
from pytest_sglang.gates import keywords
from pytest_sglang.gates.base import Check, GateOutcome
from pytest_sglang.gates.fleet.pd_parity import Parity, run_parity
from pytest_sglang.gates.fleet.pd_roles import (
    GATE,
    backend_checks,
    bootstrap_checks,
    checksum_checks,
    pd_workers,
    read_facts,
    role_checks,
)
from pytest_sglang.gates.fleet.pd_transfer import Limits, TransferWindow, read_all, transfer_checks
from pytest_sglang.gates.keywords import AtLeast, AtMost, Fraction, OneOf, Requires, Threshold, sglang_choices
from pytest_sglang.gates.load import throughput as tput
from pytest_sglang.gates.load.drain import Storm
from pytest_sglang.gates.load.throughput import DRAIN_NEEDS_CANCEL, load_keywords, load_spec
from pytest_sglang.gates.registry import GateContext
from pytest_sglang.loadgen.shape.load import LoadShape

if TYPE_CHECKING:
    from pytest_sglang.fleet.handle import SGLangFleet
    from pytest_sglang.loadgen import LoadResult, LoadSpec

__all__ = ["run_marker"]

MARKER = "@pytest.mark.sglang_pd"
# ``mooncake_tcp`` is not a backend a worker reports: SGLang 0.5.23 resolves it to mooncake with
# MC_FORCE_TCP=1, so /server_info says "mooncake" (the transfer figures show the TCP path instead).
_BACKENDS = sglang_choices("--disaggregation-transfer-backend")
Backend = Annotated[str | None, OneOf(tuple(b for b in _BACKENDS.choices if b != "mooncake_tcp"),
                                      origin="as SGLang 0.5.23's /server_info reports them")]
Failures = Annotated[int | None, AtLeast(0)]
Rate = Annotated[float | None, Fraction()]
_PD_FIX = ("launch a prefill-decode fleet with --sglang-prefill N --sglang-decode M, or point --sglang-url at "
           "SGLang's gateway in PD mode (smg launch --pd-disaggregation --prefill URL PORT --decode URL)")


def _counts(fleet: SGLangFleet | None) -> str:
    if fleet is None:
        return "a single SGLang server (no gateway in front)"
    roles = [w.role for w in fleet.workers]
    counts = {r: roles.count(r) for r in ("prefill", "decode", "regular")}
    return ", ".join(f"{n} {r}" for r, n in counts.items() if n or r != "regular") + " workers"


def _pd_fleet_check(ctx: GateContext, fleet: SGLangFleet | None) -> Check:
    """At least one prefill and one decode worker behind the gateway (else this gate has nothing to judge)."""
    roles = [w.role for w in fleet.workers] if fleet is not None else []
    ok = "prefill" in roles and "decode" in roles
    source = (f"the gateway's GET /workers worker_type at {fleet.gateway.url}" if fleet is not None
              else f"{ctx.server.url}: GET /workers is not a worker list")
    return Check(gate=GATE, metric="prefill-decode fleet", measured=_counts(fleet), op="==",
                 required="at least 1 prefill and 1 decode worker", passed=ok, source=source,
                 remedy=_PD_FIX if not ok else "")


def _needs_pd(check: Check) -> GateOutcome:
    out = GateOutcome(GATE)
    out.add(check)
    out.notes.append("sglang_pd needs a prefill-decode fleet: its checks are about the pair, and a "
                     "non-PD server would pass them vacuously")
    return out


def _under_load(ctx: GateContext, fleet: SGLangFleet, spec: LoadSpec, limits: Limits, max_error_rate: float,
                out: GateOutcome) -> LoadResult:
    workers = list(fleet.workers)
    before = read_all(workers)
    result = ctx.load(spec)
    window = TransferWindow.between(workers, before, read_all(workers))
    integrity = [c for c in (tput.server_check(ctx.server, result), tput.timeout_check(result, max_error_rate))
                 if c is not None]
    integrity.append(tput.error_check(result, max_error_rate))
    out.checks += transfer_checks(window, result, limits)
    out.checks += [dataclasses.replace(c, gate=GATE) for c in integrity]
    context = tput.describe(result)
    context.pop("server view (/metrics peaks)", None)  # sampled through the gateway: not a worker's view
    out.context.update(context)
    out.context["kv transfer"] = (window.describe(result) if not window.missing
                                  else f"unknown: {window.why_unknown()}")
    return result


@keywords.rules(
    keywords.Always("each worker has the role the gateway gives it"),
    Requires("parity_accuracy", needs=("parity",), why="accuracy parity compares with the parity's reference "
             "server", fix="add parity=True"),
    Requires("task", needs=("parity",), why="the task runs on the parity's reference server too",
             fix="add parity=True"),
    *(Requires(k, needs=("load",), why="it is measured under the gate's load", fix="drop load=False")
      for k in ("max_transfer_failures", "max_transfer_failure_rate", "max_bootstrap_failures",
                "max_bootstrap_failure_rate", "max_transfer_share", "max_transfer_ms", "cancel_rate")),
    DRAIN_NEEDS_CANCEL,
)
@load_keywords(concurrency=8, requests=64, input_len=256, output_len=16)
def run_marker(
    ctx: GateContext,
    *,
    transfer_backend: Backend = None,
    kv_checksum: bool = False,
    load: bool = True,
    max_transfer_failures: Failures = None,
    max_transfer_failure_rate: Rate = None,
    max_bootstrap_failures: Failures = None,
    max_bootstrap_failure_rate: Rate = None,
    max_transfer_share: Rate = None,
    max_transfer_ms: Threshold = None,
    max_error_rate: Annotated[float, Fraction()] = 0.0,
    shape: LoadShape,
    parity: bool = False,
    parity_prompts: Annotated[int, AtLeast(1), AtMost(24)] = 8,
    parity_max_new_tokens: Annotated[int, AtLeast(1), AtMost(256)] = 4,
    parity_logprob_delta: Annotated[float, AtLeast(0)] = 0.05,
    parity_accuracy: bool = False,
    task: Annotated[str | None, OneOf(TASKS)] = None,
    num_examples: Annotated[int, AtLeast(1), AtMost(100_000)] = 200,
    parity_max_drop: Annotated[float, Fraction()] = 0.0,
) -> GateOutcome:
    """``@pytest.mark.sglang_pd``: roles, transfer backend, transfer under load and parity of a PD fleet.

    See the module docstring for each check. This signature declares the marker's keywords (types,
    defaults, ranges): the plugin validates a marker against it at collection and shows it in ``--markers``.
    """
    fleet = fleet_of(ctx.server)
    pair = _pd_fleet_check(ctx, fleet)
    if fleet is None or not pair.passed:
        return _needs_pd(pair)
    out = GateOutcome(GATE)
    out.add(pair)
    facts = read_facts(fleet)
    out.checks += role_checks(facts) + bootstrap_checks(facts)
    if transfer_backend is not None:
        out.checks += backend_checks(facts, transfer_backend)
    if kv_checksum:
        out.checks += checksum_checks(facts)
    out.context["gateway"] = fleet.summary()
    if load:
        limits = Limits(max_transfer_failures, max_transfer_failure_rate, max_bootstrap_failures,
                        max_bootstrap_failure_rate, max_transfer_share, max_transfer_ms)
        spec = load_spec(shape, marker="sglang_pd")
        storm = Storm.before(fleet, shape.max_drain_s) if shape.storm_wanted() else None
        result = _under_load(ctx, fleet, spec, limits, max_error_rate, out)
        if storm is not None:  # prefill and decode workers alike: each gives back what the cancelled requests held
            storm.judge(GATE, result, out)
    if parity:
        chosen = task if task is not None else ("gsm8k" if parity_accuracy else None)
        run_parity(ctx, fleet, Parity(parity_prompts, parity_max_new_tokens, parity_logprob_delta, chosen,
                                      num_examples, parity_max_drop), out)
    out.context["workers"] = ", ".join(f"{w.role} {w.url}" for w in pd_workers(fleet))
    return out
