"""What the acceptance tests share: the check context fixture's settings and running one check."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Concatenate, ParamSpec

import pytest

from pytest_sglang.correctness import AcceptanceSettings, CheckContext, CheckReport, Unsupported
from pytest_sglang.plugin.keys import SETTINGS_KEY

if TYPE_CHECKING:
    from pytest_sglang.plugin.settings import Settings

P = ParamSpec("P")


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
        concurrency=resolved.sglang_acceptance_concurrency,
        disconnect_timeout_s=resolved.sglang_acceptance_disconnect_timeout,
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
    """Run one check: skip with its reason when unsupported, fail listing every problem it saw."""
    __tracebackhide__ = True
    try:
        report = check(ctx, *args, **kwargs)
    except Unsupported as exc:
        pytest.skip(str(exc))
    if not report.ok:
        pytest.fail(report.message(), pytrace=False)
    return report
