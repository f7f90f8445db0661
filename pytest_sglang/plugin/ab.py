"""The ``sglang_ab`` fixture: an interleaved A/B run inside a test, judged on paired launch differences.

A is the run's own launch (``--sglang-launch``, the runner, image, Python, fleet and gateway options);
B is A with ``--sglang-ab-launch/-image/-python/-gateway`` (or the call's ``launch_b=``). The engine is
:mod:`pytest_sglang.gates.load.ab`; this module only turns options and keywords into its arguments, records
the outcome like a marker's (every report shows it) and turns "cannot judge" into a skip that says so
(a failure under ``--sglang-strict``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pytest

from pytest_sglang import redaction
from pytest_sglang.errors import SGLangError
from pytest_sglang.plugin.keys import POOL_KEY

if TYPE_CHECKING:
    from pytest_sglang.fleet.launch import FleetSpec
    from pytest_sglang.gates.base import GateOutcome
    from pytest_sglang.gates.load.ab import ABSide
    from pytest_sglang.loadgen import LoadResult, LoadSpec
    from pytest_sglang.plugin.pool import ServerPool
    from pytest_sglang.plugin.settings import Settings
    from pytest_sglang.server.config import LaunchConfig
    from pytest_sglang.server.members import Handle

#: Load time assumed per launch when --sglang-load-timeout is not set (for the run's one deadline).
LOAD_BUDGET_S = 600.0


class ABRunner:
    """What ``sglang_ab`` returns: ``sglang_ab(spec or LoadSpec fields, launch_b=..., launches=...)``."""

    def __init__(self, request: pytest.FixtureRequest, pool: ServerPool) -> None:
        self._request = request
        self._pool = pool

    def __call__(self, spec: LoadSpec | None = None, *, launch_b: str | Sequence[str] | None = None,
                 launches: int | None = None, order: str | None = None, seed: int | None = None,
                 max_regression: str | None = None, alpha: float = 0.01, power: float = 0.95,
                 timeout_s: float | None = None, **fields: object) -> GateOutcome:
        """Launch A and B in turn, one load per launch; record and return the A/B outcome.

        Args:
            spec: the load of each launch (or give ``LoadSpec`` fields over the A/B's default load,
                ``gates.load.ab.DEFAULT_LOAD``: 128 requests, lengths drawn); pair ``i`` uses ``seed + i``.
            launch_b: B's launch args (default ``--sglang-ab-launch``, else A's: an A/A run).
            launches: launches per side (default ``--sglang-ab-launches``).
            order: ``random`` or ``alternate`` (default ``--sglang-ab-order``).
            seed: the order's seed (default ``--sglang-ab-seed``).
            max_regression: ``5%`` or ``metric:pct,...`` (default ``--sglang-ab-max-regression``, else 5 %).
            alpha: the one-sided false-alarm rate (default 0.01).
            power: the chance wanted of seeing a change of the limit (default 0.95).
            timeout_s: one deadline for the whole run (default from the start-up and load timeouts).
            **fields: ``LoadSpec`` fields when ``spec`` is not given (``requests=``, ``concurrency=``...).

        A regression beyond the limit and the noise fails the test after its body; a run too noisy to
        judge the limit skips it saying how many launches per side would do (fails under --sglang-strict).
        """
        __tracebackhide__ = True
        from pytest_sglang.gates.load import ab
        from pytest_sglang.plugin.keys import SETTINGS_KEY
        from pytest_sglang.plugin.load_runner import _spec
        from pytest_sglang.plugin.results import record
        from pytest_sglang.report.baseline import paired_limits

        settings: Settings = self._request.config.stash[SETTINGS_KEY]
        if spec is None:
            try:
                spec = _spec(ab.load_fields(fields))
            except (TypeError, ValueError) as exc:
                raise pytest.fail.Exception(
                    f"sglang_ab(): {str(exc).replace('sglang_load()', 'sglang_ab()')}", pytrace=False) from None
        elif fields:
            pytest.fail("sglang_ab(): give either a LoadSpec or LoadSpec fields, not both", pytrace=False)
        n = settings.sglang_ab_launches if launches is None else launches
        how = settings.sglang_ab_order if order is None else order
        run_seed = settings.sglang_ab_seed if seed is None else seed
        try:
            ab.check_plan(n, how, source="sglang_ab(launches=...)" if launches is not None else "--sglang-ab-launches",
                          order_source="sglang_ab(order=...)" if order is not None else "--sglang-ab-order")
            _check_keywords(seed=run_seed, alpha=alpha, power=power, timeout_s=timeout_s)
            limits = paired_limits(
                max_regression if max_regression is not None else settings.sglang_ab_max_regression, tuple(ab.METRICS),
                "sglang_ab(max_regression=...)" if max_regression is not None else "--sglang-ab-max-regression")
            a, b = self._sides(settings, launch_b)
        except SGLangError as exc:
            raise pytest.fail.Exception(redaction.scrub(str(exc)), pytrace=False) from None
        deadline = timeout_s if timeout_s is not None else 2 * n * (
            settings.sglang_startup_timeout + (settings.sglang_load_timeout or LOAD_BUDGET_S))
        same = (a.config, a.fleet) == (b.config, b.fleet)
        from pytest_sglang.plugin.pool import terminal_write

        write = terminal_write(self._request.config, visible=True)
        if write is not None:
            write(f"sglang ab: {n} launches per side, order {how} (seed {run_seed})"
                  + (": B is the same configuration as A (an A/A run: it measures the noise)" if same else ""))
        try:
            run = ab.run_ab(a, b, spec, self._load, launches=n, order=how, seed=run_seed, deadline_s=deadline,
                            metrics=tuple(limits), say=write)
        except SGLangError as exc:
            raise pytest.fail.Exception(
                redaction.scrub(f"sglang_ab could not measure: {type(exc).__name__}: {exc}"), pytrace=False) from None
        verdicts = ab.judge_run(run, limits, alpha=alpha, power=power)
        outcome = ab.outcome_of(run, verdicts, describe_a=_describe(a), describe_b=_describe(b) + (
            " (same as A)" if same else ""))
        if not verdicts:
            pytest.fail(f"sglang_ab checked nothing: no metric of {', '.join(limits)} was measured in every launch",
                        pytrace=False)
        record(self._request.node, outcome)
        if outcome.passed and outcome.unchecked:  # nothing regressed, something could not be judged
            text = redaction.scrub("sglang_ab could not judge: " + "; ".join(outcome.unchecked))
            if settings.sglang_strict:
                pytest.fail(f"{text} (--sglang-strict: a check that cannot judge fails)", pytrace=False)
            pytest.skip(text)
        return outcome

    def _load(self, handle: Handle, spec: LoadSpec) -> LoadResult:
        from pytest_sglang.plugin.load_runner import load_runner

        runner = load_runner(self._request, handle)
        runner.gate = "ab"  # recorded as the A/B's own loads, not a measurement a baseline compares
        return runner(spec)

    def _sides(self, settings: Settings, launch_b: str | Sequence[str] | None) -> tuple[ABSide, ABSide]:
        from pytest_sglang.errors import ConfigError
        from pytest_sglang.gates.load.ab import ABSide
        from pytest_sglang.plugin.launch_args import check_launch
        from pytest_sglang.plugin.launch_config import launch_config
        from pytest_sglang.plugin.values import parse_args

        if self._pool.worker_input is not None:
            pytest.fail("sglang_ab cannot launch in an xdist worker (workers never launch): run the tests that use "
                        "it without -n, e.g. -p no:xdist", pytrace=False)
        if settings.mode != "launch":
            raise ConfigError("sglang_ab", settings.mode or "no server", "an A/B run launches both configurations "
                              "itself", "give A's launch with --sglang-launch (or --sglang-simulate), not --sglang-url")
        a_config = launch_config(settings, self._pool.log_dir())
        b_args = a_config.args if settings.sglang_ab_launch is None else tuple(settings.sglang_ab_launch)
        if launch_b is not None:
            if not isinstance(launch_b, str) and (not isinstance(launch_b, Sequence)
                                                  or not all(isinstance(x, str) for x in launch_b)):
                raise ConfigError("sglang_ab(launch_b=...)", f"<{type(launch_b).__name__}>", "expected B's launch "
                                  "args as one string or a list of strings", "pass e.g. launch_b=\"--model-path M "
                                  "--tp 2\"")
            try:
                argv = parse_args(launch_b) if isinstance(launch_b, str) else list(launch_b)
                check_launch(argv)  # a typo in B's args is refused before anything starts
            except ConfigError as exc:
                raise ConfigError("sglang_ab(launch_b=...)", launch_b, exc.problem, exc.fix) from None
            except ValueError as exc:
                raise ConfigError("sglang_ab(launch_b=...)", launch_b, str(exc),
                                  "give B's launch_server args, e.g. launch_b=\"--model-path M --tp 2\"") from None
            b_args = tuple(argv)
        b_config = dataclasses.replace(a_config, args=b_args, python=settings.sglang_ab_python or a_config.python)
        if settings.sglang_ab_image is not None and b_config.docker is not None:
            b_config = dataclasses.replace(b_config, docker=dataclasses.replace(b_config.docker,
                                                                                image=settings.sglang_ab_image))
        a_fleet = _fleet(settings, None)
        b_fleet = _fleet(settings, settings.sglang_ab_gateway)
        return ABSide("A", a_config, a_fleet), ABSide("B", b_config, b_fleet)


def _fleet(settings: Settings, gateway: tuple[str, ...] | None) -> FleetSpec | None:
    """The run's fleet (``--sglang-workers``, PD), with ``gateway`` args instead of A's when given."""
    from pytest_sglang.plugin.fleet_spec import fleet_spec

    return fleet_spec(settings, gateway) if settings.fleet else None


def _check_keywords(*, seed: object, alpha: object, power: object, timeout_s: object) -> None:
    from pytest_sglang.errors import ConfigError

    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError("sglang_ab(seed=...)", seed, "must be a whole number >= 0", "pass e.g. seed=7")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 0.5:
        raise ConfigError("sglang_ab(alpha=...)", alpha, "must be a false-alarm rate between 0 and 0.5",
                          "pass e.g. alpha=0.01")
    if isinstance(power, bool) or not isinstance(power, (int, float)) or not 0.5 < power < 1:
        raise ConfigError("sglang_ab(power=...)", power, "must be between 0.5 and 1", "pass e.g. power=0.95")
    if timeout_s is not None and (isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float))
                                  or not timeout_s > 0):
        raise ConfigError("sglang_ab(timeout_s=...)", timeout_s, "must be a number of seconds > 0",
                          "pass e.g. timeout_s=1800, or leave it out")


def _describe(side: ABSide) -> str:
    config: LaunchConfig = side.config
    parts = [" ".join(config.launch_args.display())]
    if config.docker is not None and config.docker.image:
        parts.append(f"image {config.docker.image}")
    if config.python:
        parts.append(f"python {config.python}")
    if config.ray is not None:
        parts.append(f"placed on Ray (strategy {config.ray.ray_strategy})")
    if side.fleet is not None:
        fleet = side.fleet
        workers = f"{fleet.prefill} prefill + {fleet.decode} decode workers" if fleet.pd else f"{fleet.total} workers"
        parts.append(f"{workers}, gateway {' '.join(fleet.gateway_args) or '(defaults)'}")
    return redaction.scrub("; ".join(parts))


def ab_runner(request: pytest.FixtureRequest) -> ABRunner:
    """The test's :class:`ABRunner` (the plugin must be active)."""
    pool = request.config.stash.get(POOL_KEY, None)
    if pool is None:
        pytest.fail("pytest-sglang is not active in this run (--collect-only?)", pytrace=False)
    pool.use_tmp_factory(request.getfixturevalue("tmp_path_factory"))
    return ABRunner(request, pool)
