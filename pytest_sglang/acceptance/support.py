"""What the acceptance tests share: the check context fixture's settings and running one check."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec

import pytest

from pytest_sglang.correctness import AcceptanceSettings, CheckContext, CheckReport, Unsupported
from pytest_sglang.errors import ConfigError

P = ParamSpec("P")

#: AcceptanceSettings field -> the pytest option (dest) that sets it, and its type.
OPTION_FIELDS: dict[str, tuple[str, type[int] | type[float]]] = {
    "samples": ("sglang_acceptance_samples", int),
    "max_tokens": ("sglang_acceptance_max_tokens", int),
    "request_timeout_s": ("sglang_acceptance_request_timeout", float),
    "min_match_rate": ("sglang_acceptance_min_match_rate", float),
    "max_kl": ("sglang_acceptance_max_kl", float),
    "concurrency": ("sglang_acceptance_concurrency", int),
    "disconnect_timeout_s": ("sglang_acceptance_disconnect_timeout", float),
}


def settings_from(config: pytest.Config) -> AcceptanceSettings:
    """The settings from the run's options (defaults where an option is not given or not declared)."""
    values: dict[str, Any] = {}
    for name, (dest, kind) in OPTION_FIELDS.items():
        raw = config.getoption(dest, default=None)
        if raw is None:
            continue
        try:
            values[name] = kind(raw)
        except (TypeError, ValueError):
            flag = "--" + dest.replace("_", "-")
            raise pytest.UsageError(f"{flag}={raw!r}: not a {kind.__name__}. Fix: pass a number, e.g. "
                                    f"{flag}={getattr(AcceptanceSettings, name)}") from None
    try:
        return AcceptanceSettings(**values)
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None


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
