"""What the acceptance tests share: the check context fixture's settings and running one check."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Concatenate, ParamSpec

import pytest

from pytest_sglang.correctness import AcceptanceSettings, CheckContext, CheckReport, Unsupported
from pytest_sglang.correctness.deadline import Budget, CheckStalled
from pytest_sglang.gates.correctness.acceptance import acceptance_outcome
from pytest_sglang.plugin.keys import SETTINGS_KEY
from pytest_sglang.plugin.results import record

if TYPE_CHECKING:
    from pytest_sglang.plugin.settings import Settings

P = ParamSpec("P")
#: The test running a check: :func:`run` records each check on it (the reports' acceptance rows).
_ITEM: ContextVar[pytest.Item | None] = ContextVar("sglang_acceptance_item", default=None)


@pytest.fixture(autouse=True)
def sglang_acceptance_records(request: pytest.FixtureRequest) -> Iterator[None]:
    """Let :func:`run` record its checks on the running test (autouse in the suites' conftest)."""
    token = _ITEM.set(request.node)
    yield
    _ITEM.reset(token)


def acceptance_settings(resolved: Settings) -> AcceptanceSettings:
    """The suite's knobs from the run's resolved ``--sglang-acceptance-*`` settings.

    The option rows parse and check each value (CLI > env > ini > default; a bad one is a usage
    error naming where it came from), so the values arrive typed and valid.
    """
    return AcceptanceSettings(
        samples=resolved.sglang_acceptance_samples,
        max_tokens=resolved.sglang_acceptance_max_tokens,
        request_timeout_s=resolved.sglang_acceptance_request_timeout,
        min_match_rate=resolved.sglang_acceptance_min_match_rate,
        max_kl=resolved.sglang_acceptance_max_kl,
        max_vision_share=resolved.sglang_acceptance_max_vision_share,
        concurrency=resolved.sglang_acceptance_concurrency,
        disconnect_timeout_s=resolved.sglang_acceptance_disconnect_timeout,
        check_timeout_s=resolved.sglang_acceptance_check_timeout,
        suite_timeout_s=resolved.sglang_acceptance_timeout,
    )


def settings_from(config: pytest.Config) -> AcceptanceSettings:
    """The settings of this run (the plugin resolved them at configure time)."""
    resolved = config.stash.get(SETTINGS_KEY, None)
    if resolved is None:  # e.g. -p no:sglang: the suite has no server either
        pytest.fail("the acceptance suite needs the pytest-sglang plugin, which is not active in this run "
                    "(remove -p no:sglang)", pytrace=False)
    return acceptance_settings(resolved)


def run(check: Callable[Concatenate[CheckContext, P], CheckReport], ctx: CheckContext,
        *args: P.args, **kwargs: P.kwargs) -> CheckReport:
    """Run one check: skip with its reason when unsupported, fail listing every problem it saw.

    The check is recorded like a gate's (summary table, JSON, JUnit, Markdown, HTML).
    """
    __tracebackhide__ = True
    suite = ctx.budget or Budget.for_suite(ctx.settings.suite_timeout_s)
    try:
        report = check(dataclasses.replace(ctx, budget=suite.for_check(ctx.settings.check_timeout_s)),
                       *args, **kwargs)
    except Unsupported as exc:
        pytest.skip(str(exc))
    except CheckStalled as exc:  # the first stalled request ends the check: that is its finding
        report = CheckReport(_title(check, args), problems=[_in_option_words(str(exc))])
    item = _ITEM.get()
    if item is not None:
        record(item, acceptance_outcome(report))
    if not report.ok:
        pytest.fail(report.message(), pytrace=False)
    return report


#: The engine's field names in a stall finding, in the words of the options that set them.
_OPTION_OF = {"check_timeout_s": "--sglang-acceptance-check-timeout", "suite_timeout_s": "--sglang-acceptance-timeout"}


def _in_option_words(text: str) -> str:
    for name, option in _OPTION_OF.items():
        text = text.replace(name, option)
    return text


def _title(check: Callable[..., CheckReport], args: tuple[object, ...]) -> str:
    """``shape (chat, stream)``: the check's name where its own report never came back."""
    name = check.__name__.removeprefix("check_").replace("_", " ")
    words = [("stream" if a else "batch") if isinstance(a, bool) else str(a) for a in args]
    return f"{name} ({', '.join(words)})" if words else name
