"""Launch a fleet: N identical workers (with the existing runners), then SGLang's gateway in front of them.

One deadline (``startup_timeout_s``) covers the whole start. Everything that can be refused is refused
before anything starts (gateway missing, gateway flags the fleet owns, ``--port`` in the launch args,
too few GPUs, host pools of all workers together). The workers start in parallel; when one dies, the
start fails at once naming it (index, port, log, how it ended, its log tail) and every other process
of the fleet is stopped; the same on Ctrl-C. Then the gateway starts with every worker's URL and the
fleet is ready when the gateway says so and lists every worker healthy.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pytest_sglang import defaults
from pytest_sglang.errors import (
    ConfigError,
    LaunchConfigError,
    PreflightError,
)
from pytest_sglang.fieldtypes import wrong_type
from pytest_sglang.fleet.devices import device_blocks_for
from pytest_sglang.fleet.discovery import Role
from pytest_sglang.fleet.gateway import (
    GatewayCommand,
    GatewayMember,
    check_args_for,
    check_gateway_args,
    gateway_argv,
    resolve_command,
    start_gateway,
)
from pytest_sglang.fleet.handle import SGLangFleet, WorkerHandle
from pytest_sglang.fleet.probe import probe_workers
from pytest_sglang.fleet.progress import FleetProgress
from pytest_sglang.fleet.readiness import GatewayTarget, gateway_client_key, wait_gateway_ready
from pytest_sglang.fleet.spawn import WorkerPlan, start_workers, stop_all
from pytest_sglang.server import cleanup, preflight
from pytest_sglang.server.config import LaunchConfig, connect_host, server_url
from pytest_sglang.server.handle import SGLangServer
from pytest_sglang.server.phases import PhaseSpan, StartupReport
from pytest_sglang.server.select_runner import get_runner
from pytest_sglang.server.start import launch, register_secrets
from pytest_sglang.server.url import parse_server_url
from pytest_sglang.sglang.hostmem import GB
from pytest_sglang.sockets import free_port

__all__ = ["FleetSpec", "launch_fleet"]



def _error(name: str, value: object, problem: str, fix: str) -> LaunchConfigError:
    """A bad :class:`FleetSpec` field in the engine's words (the plugin names its option instead)."""
    return LaunchConfigError("FleetSpec", name, value, problem, fix)


@dataclass(frozen=True)
class FleetSpec:
    """How many workers, and the gateway in front of them (the plugin fills it from the options)."""

    #: Regular workers (``--sglang-workers``); 0 in a prefill-decode fleet.
    workers: int
    gateway_args: tuple[str, ...] = ()
    gateway_command: tuple[str, ...] | None = None
    min_workers: int | None = None
    direct: str = defaults.DEFAULT_FLEET_DIRECT
    gpus: str = defaults.DEFAULT_GPUS
    #: Prefill and decode workers (``--sglang-prefill N --sglang-decode M``), each with its role's extra args.
    prefill: int = 0
    decode: int = 0
    prefill_args: tuple[str, ...] = ()
    decode_args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        """Check the counts and modes; errors name the field (``FleetSpec.workers``), the plugin its option."""
        wrong = wrong_type(self)
        if wrong is not None:  # never an args value: gateway and worker args may hold keys
            raise _error(wrong.name, wrong.shown(("gateway_args", "gateway_command", "prefill_args", "decode_args")),
                         wrong.problem, f"pass {{name}} {wrong.expected}")
        for name in ("gateway_args", "prefill_args", "decode_args", "gateway_command"):
            if getattr(self, name) is not None:  # lists accepted; kept as tuples (hashable, frozen)
                object.__setattr__(self, name, tuple(getattr(self, name)))
        for name in ("workers", "prefill", "decode"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise _error(name, value, "must be a whole number >= 1", "pass e.g. {name} 2")
        if self.pd and (self.prefill < 1 or self.decode < 1):
            raise _error("prefill", f"{self.prefill}/{self.decode} (prefill/decode)",
                         "a prefill-decode fleet needs at least one prefill and one decode worker",
                         "pass both prefill and decode, e.g. 1 and 1")
        if self.pd and self.workers:
            raise _error("workers", self.workers, "regular workers cannot join a prefill-decode fleet (the gateway "
                         "runs in one mode)", "drop {name}, or drop the prefill and decode workers")
        if self.total < 1:
            raise _error("workers", self.workers, "must be a whole number >= 1", "pass e.g. {name} 2")
        if self.min_workers is not None and not 1 <= self.min_workers <= self.total:
            raise _error("min_workers", self.min_workers, f"must be between 1 and the {self.total} launched workers",
                         f"pass at most {{name}} {self.total}")
        if self.direct not in defaults.FLEET_DIRECT_MODES:
            raise _error("direct", self.direct, "unknown mode", f"pass one of {', '.join(defaults.FLEET_DIRECT_MODES)}")
        check_gateway_args(self.gateway_args)

    @property
    def pd(self) -> bool:
        """True for a prefill-decode fleet."""
        return bool(self.prefill or self.decode)

    @property
    def total(self) -> int:
        """Every worker of the fleet."""
        return self.workers + self.prefill + self.decode

    def roles(self) -> list[Role]:
        """One role per worker, in launch order (prefill workers first)."""
        prefill: list[Role] = ["prefill"] * self.prefill
        decode: list[Role] = ["decode"] * self.decode
        regular: list[Role] = ["regular"] * self.workers
        return prefill + decode + regular


def _worker_config(config: LaunchConfig, block: tuple[str, ...] | None) -> LaunchConfig:
    if block is None:
        return config
    ids = ",".join(block)
    if config.docker is not None:
        return dataclasses.replace(config, docker=dataclasses.replace(config.docker, gpus=ids))
    env = tuple((k, v) for k, v in config.env if k != "CUDA_VISIBLE_DEVICES")
    return dataclasses.replace(config, env=(*env, ("CUDA_VISIBLE_DEVICES", ids)))


def _free_ports(host: str, n: int) -> list[int]:
    ports: list[int] = []
    while len(ports) < n:  # the OS may hand the same free port out twice in a row
        port = free_port(host)
        if port not in ports:
            ports.append(port)
    return ports


def launch_fleet(config: LaunchConfig, spec: FleetSpec, progress: FleetProgress | None = None) -> SGLangFleet:
    """Start the fleet of ``config`` x ``spec.workers`` behind a gateway and return it.

    The caller stops it with ``stop()`` (gateway first, then every worker).
    """
    started = time.monotonic()
    register_secrets(config)
    args = config.launch_args
    if args.given("port"):
        raise ConfigError("--sglang-launch", "--port", "a fleet picks a free port for each worker",
                          "drop --port from the launch args (the gateway is what tests talk to)")
    command = resolve_command(spec.gateway_command, config.python)
    check_args_for(command, spec.gateway_args)  # a gateway typo is refused before any worker starts
    roles = spec.roles()
    role_configs = [_role_config(config, role, spec) for role in roles]
    _preflight(config, role_configs, spec)
    # On Ray, Ray gives each worker's bundle its GPUs (CUDA_VISIBLE_DEVICES on the node).
    blocks = (device_blocks_for([c.launch_args for c in role_configs], spec.gpus)
              if config.runner != "simulator" and config.ray is None else [None] * len(roles))
    host = "127.0.0.1" if config.runner == "docker" else connect_host(args)
    ports = _free_ports(host, len(roles) + spec.prefill + 2)
    boot = iter(ports[len(roles):len(roles) + spec.prefill])
    plans = []
    for i, role in enumerate(roles):
        bootstrap = next(boot) if role == "prefill" else None
        role_config = _with_bootstrap(role_configs[i], bootstrap)
        port = 0 if config.ray is not None else ports[i]  # 0: picked free on the Ray node that holds the worker
        plans.append(WorkerPlan(i, role, _worker_config(role_config, blocks[i]), port, bootstrap))
    # One placement for every worker (Ray: one group, so the strategy spreads them); given back on failure.
    abandon = get_runner(config, None).place_together([p.config for p in plans], started + config.startup_timeout_s)
    try:
        servers = start_workers(plans, progress)
    except BaseException:
        abandon()
        raise
    gateway_port, metrics_port = ports[-2:]
    try:
        return _start_gateway(config, spec, command, servers, plans, gateway_port, metrics_port, started, progress)
    except BaseException:
        stop_all([s.process for s in servers if s.process is not None])
        abandon()
        raise


def _role_config(config: LaunchConfig, role: Role, spec: FleetSpec) -> LaunchConfig:
    """The launch config of one role: the common args, the role's flags, then the role's own args."""
    if role == "regular":
        return config
    extra = spec.prefill_args if role == "prefill" else spec.decode_args
    option = f"--sglang-{role}-launch"
    try:
        return dataclasses.replace(config, args=(*config.args, "--disaggregation-mode", role, *extra))
    except ConfigError as exc:
        raise ConfigError(option, " ".join(extra), exc.problem, exc.fix) from None


def _with_bootstrap(config: LaunchConfig, port: int | None) -> LaunchConfig:
    if port is None or config.launch_args.given("disaggregation_bootstrap_port"):
        return config
    return dataclasses.replace(config, args=(*config.args, "--disaggregation-bootstrap-port", str(port)))


def _preflight(config: LaunchConfig, role_configs: list[LaunchConfig], spec: FleetSpec) -> None:
    """The hicache preflight counting every worker on this host (each role's pools with its own args)."""
    runner = get_runner(config, None)
    distinct = {c: role_configs.count(c) for c in role_configs}
    if len(distinct) == 1:
        preflight.check(config, runner, role_configs[0].launch_args, workers=spec.total)
        return
    for role_config, count in distinct.items():  # each role's own pools must fit on their own too
        preflight.check(role_config, runner, role_config.launch_args, workers=count)
    plans = [(preflight.plan_for(c, runner, c.launch_args), n) for c, n in distinct.items()
             if c.preflight and c.launch_args.enable_hierarchical_cache]
    totals = [p.total_bytes for p, _ in plans]
    if plans and all(t is not None for t in totals):
        need = sum((t or 0) * n for t, (_, n) in zip(totals, plans, strict=True))
        budget = plans[0][0].budget_bytes
        if need > budget:
            raise PreflightError(f"the fleet's host pools need {need / GB:.0f} GB together ("
                                 + ", ".join(f"{n} x {(p.total_bytes or 0) / GB:.0f} GB" for p, n in plans)
                                 + f"), but {budget / GB:.0f} GB are available. Nothing was started.",
                                 fix="lower --hicache-size (GB per rank) in the role launch args, or launch fewer "
                                     "workers on this host")


def _start_gateway(config: LaunchConfig, spec: FleetSpec, command: GatewayCommand, servers: list[SGLangServer],
                   plans: list[WorkerPlan], port: int, metrics_port: int, started: float,
                   progress: FleetProgress | None) -> SGLangFleet:
    host = connect_host(config.launch_args)
    urls = [s.url for s in servers]
    extra = spec.gateway_args
    key, key_source = gateway_client_key(extra, config.client_api_key)  # what the gateway wants from clients
    if config.client_api_key and "--api-key" not in extra:
        extra = (*extra, "--api-key", config.client_api_key)  # the gateway authenticates to the workers with it
    members = [GatewayMember(s.url, p.role, p.bootstrap_port) for s, p in zip(servers, plans, strict=True)]
    argv = gateway_argv(command, host=host, port=port, metrics_port=metrics_port, members=members, args=extra)
    directory = servers[0].log_path.parent if servers[0].log_path is not None else Path(".")
    log_path = directory / f"gateway-{port}.log"
    url = server_url(config, port)
    if progress is not None:
        mode = " in prefill-decode mode" if spec.pd else ""
        progress.line(f"gateway {command.describe()} starting at {url}{mode} in front of {len(urls)} workers")
    workers_ready_s = time.monotonic() - started
    proc = start_gateway(argv, url=url, log_path=log_path, env=config.env_dict)
    cleanup.track(proc)
    try:
        address = parse_server_url(url, source="gateway URL")
        target = GatewayTarget(address, config.runner, api_key=key, process=proc, min_workers=spec.min_workers,
                               expect_urls=urls, key_source=key_source, gateway_args=spec.gateway_args)
        discovery = wait_gateway_ready(target, config.startup_timeout_s, started=started,
                                       say=progress.line if progress is not None else None)
        handles = probe_workers(discovery, api_key=config.client_api_key, validate=config.validate,
                                direct=spec.direct, timeout_s=30.0, known={s.url: s for s in servers})
    except BaseException:
        stop_all([proc])
        raise
    handles = _numbered_as_launched(handles, servers, plans)
    # The fleet's start runs from the first worker's launch to the gateway's readiness (not the gateway's own).
    ready_s = time.monotonic() - started
    startup = StartupReport(phases=[PhaseSpan("starting workers", 0.0, workers_ready_s),
                                    PhaseSpan("starting gateway", workers_ready_s, ready_s)], ready_s=ready_s)
    gateway = SGLangServer(address, config.runner, config=config, launch_args=config.launch_args, process=proc,
                           api_key=key, validate=config.validate, startup=startup)
    # The flavour the gateway shows wins over the command's name (an "smg" script may be sglang-router's).
    version = command.version if command.flavor == discovery.flavor else None
    fleet = SGLangFleet(gateway, discovery.flavor, handles, version=version, direct=spec.direct,
                        restarter=_restarter(progress), metrics_url=f"http://{host}:{metrics_port}/metrics",
                        gateway_restarter=_gateway_restarter(gateway, argv, log_path, config.env_dict))
    if progress is not None:
        progress.line(f"gateway ready at {url}: {fleet.summary()} "
                      f"({time.monotonic() - started:.1f}s since the start)")
    return fleet


def _numbered_as_launched(handles: list[WorkerHandle], servers: list[SGLangServer],
                          plans: list[WorkerPlan]) -> list[WorkerHandle]:
    """The workers numbered as the start-up display numbered them (launch order), with their launch config.

    The gateway lists its workers in its own order (by URL): "worker 0" named one process in the
    start-up lines and another in the gate table.
    """
    plan_of = {s.url: p for s, p in zip(servers, plans, strict=True)}
    for handle in handles:
        plan = plan_of.get(handle.url)
        handle.config = plan.config if plan is not None else None
    launched = sorted((h for h in handles if h.url in plan_of), key=lambda h: plan_of[h.url].index)
    others = [h for h in handles if h.url not in plan_of]  # not ours (the gateway found it elsewhere)
    for index, handle in enumerate([*launched, *others]):
        handle.index = index
    return [*launched, *others]


def _gateway_restarter(gateway: SGLangServer, argv: list[str], log_path: Path,
                       env: dict[str, str]) -> Callable[[int], None]:
    """A container restart of the gateway: the signal, its exit, the same command again on the same ports."""
    def restart(signum: int) -> None:
        old = gateway.process
        if old is not None:
            old.kill(signum)
            old.stop(grace_s=5.0)  # reaps it (and SIGKILLs a gateway that ignored a gentler signal)
            cleanup.untrack(old)
        proc = start_gateway(argv, url=gateway.url, log_path=log_path, env=env)
        cleanup.track(proc)
        gateway.process = proc

    return restart


def _restarter(progress: FleetProgress | None) -> Callable[[WorkerHandle], SGLangServer]:
    def restart(worker: WorkerHandle) -> SGLangServer:
        assert worker.config is not None
        port = parse_server_url(worker.url, source="worker URL").port
        sink = progress.for_worker(worker.index, port, worker.role) if progress is not None else None
        return launch(worker.config, sink, port=port, preflight_done=True)

    return restart
