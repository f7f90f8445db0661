"""``python -m pytest_sglang.simulator``: parse, start up (port closed), serve, warm up."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import Sequence

from aiohttp import web

from pytest_sglang.simulator import tokenizer
from pytest_sglang.simulator.config import MODELLED_PASSTHROUGH, SimConfig, resolve
from pytest_sglang.simulator.disagg import config as pd_config
from pytest_sglang.simulator.failures.faults import parse_faults
from pytest_sglang.simulator.front import handlers
from pytest_sglang.simulator.front.app import build_app
from pytest_sglang.simulator.launch import cli
from pytest_sglang.simulator.launch.jitter import jittered, launch_factor
from pytest_sglang.simulator.launch.leak import run_leak
from pytest_sglang.simulator.launch.nodes import Node
from pytest_sglang.simulator.launch.ranks import Rendezvous
from pytest_sglang.simulator.launch.startup import SITE_PACKAGES, Startup, fault, oom_kill
from pytest_sglang.simulator.logs import Logger
from pytest_sglang.simulator.model.streams import collect
from pytest_sglang.simulator.scheduling import speculative
from pytest_sglang.simulator.scheduling.engine import Engine
from pytest_sglang.simulator.scheduling.profiles import Speed, get_profile
from pytest_sglang.simulator.scheduling.request import Request
from pytest_sglang.simulator.scheduling.sink import Sink
from pytest_sglang.simulator.scheduling.storage import FileTier, storage_dir
from pytest_sglang.simulator.scheduling.trace import Trace
from pytest_sglang.simulator.state import STARTING, UP, State


def _speed(cfg: SimConfig, log: Logger) -> Speed:
    s, base = cfg.sim, cfg.profile.speed
    speed = Speed(
        prefill_tok_s=s.prefill_tok_s or base.prefill_tok_s,
        prefill_base_s=base.prefill_base_s,
        decode_base_s=s.decode_step_ms / 1000 if s.decode_step_ms else base.decode_base_s,
        decode_per_req_s=(
            s.decode_step_per_req_ms / 1000 if s.decode_step_per_req_ms is not None else base.decode_per_req_s
        ),
    )
    if not s.launch_jitter:
        return speed
    factor = launch_factor(s.launch_jitter, s.launch_seed)
    seed = f"seed {s.launch_seed}" if s.launch_seed is not None else "unseeded: a fresh draw"
    # Said in the server log, so a run's figures can be traced to its launch's draw.
    log.info(f"simulator: this launch's speed factor is {factor:.4f} (every prefill and decode time x {factor:.4f};"
             f" --sim-launch-jitter {s.launch_jitter:g}, {seed})")
    return jittered(speed, factor)


def _warn_passthrough(log: Logger, cfg: SimConfig) -> None:
    # Flags that are not 0.5.23 flags never get here: cli.parse rejects them as SGLang does.
    for name in cfg.args.passthrough:
        if name not in MODELLED_PASSTHROUGH:
            flag = "--" + name.replace("_", "-")
            log.warning(f"{flag} is an SGLang 0.5.23 flag that the simulator accepts but does not simulate")


async def _warmup(state: State) -> None:
    cfg, log = state.cfg, state.log
    await asyncio.sleep(cfg.scaled(cfg.profile.phase_s.get("warmup", 0.0)))
    kind = cfg.faults.at("warmup")
    if kind == "hang-at":
        await asyncio.Event().wait()  # the warmup request never returns: /health stays 503
    if kind == "crash-at":
        log.always(
            "Initialization failed. warmup error: Traceback (most recent call last):\n  File "
            '"sglang/srt/entrypoints/http_server.py", line 1795, in _execute_server_warmup\n'
            "RuntimeError: simulated warmup failure (--sim-fault crash-at:warmup)"
        )
        os._exit(1)
    if kind == "oom-kill-at":
        oom_kill(log)
    if not cfg.args.skip_server_warmup:
        log.access("127.0.0.1:0", "GET", "/model_info", 200, "OK")
        ids = tokenizer.encode("The capital city of France is")
        req = Request(
            rid="warmup",
            prompt_ids=ids,
            max_new=8,
            ignore_eos=False,
            stop=[],
            random_seed=0,
            emit=collect,
            sink=Sink(None),
            stream=False,
            endpoint="/generate",
            log_metrics=False,
        )
        state.engine.submit(req)
        await req.done
        log.info(
            f"Prefill batch, #new-seq: 1, #new-token: {len(ids)}, #cached-token: 0, token usage: 0.00, "
            "#running-req: 0, #queue-req: 0, "
        )
        log.access("127.0.0.1:0", "POST", "/generate", 200, "OK")
        log.access("127.0.0.1:0", "POST", "/freeze_gc", 200, "OK")
    state.status = UP
    state.up_perf = time.perf_counter()
    state.trace.event("server_up")
    log.info("The server is fired up and ready to roll!")


async def _serve(state: State) -> None:
    cfg, log = state.cfg, state.log
    fault(cfg, log, "uvicorn")
    await asyncio.sleep(cfg.scaled(cfg.profile.phase_s.get("uvicorn", 0.0)))
    log.uvicorn(f"Started server process [{os.getpid()}]")
    log.uvicorn("Waiting for application startup.")
    log.uvicorn("Application startup complete.")
    handlers.preload()  # the model behind the routes: imported after the start-up log, before the port opens
    runner = web.AppRunner(build_app(state), access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, cfg.args.host, state.port, reuse_address=True)
    await site.start()
    state.engine.start()
    state.trace.event("port_open", port=state.port)
    log.uvicorn(f"Uvicorn running on http://{cfg.args.host}:{state.port} (Press CTRL+C to quit)")
    warmup = asyncio.get_running_loop().create_task(_warmup(state))
    leak_rate = cfg.faults.production.leak_mb_per_min
    leak = asyncio.get_running_loop().create_task(run_leak(leak_rate, log.always)) if leak_rate else None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.uvicorn("Shutting down")
    warmup.cancel()
    if leak is not None:
        leak.cancel()
    await runner.cleanup()
    state.trace.close()


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args, sim = cli.parse(argv)
    log = Logger(args.log_level)
    refused = Node.from_args(args).check()
    if refused is not None:  # ServerArgs' own checks, before anything starts (validation_hook.py:179,199)
        log.raw(f"Traceback (most recent call last):\n  File \"{SITE_PACKAGES}/sglang/srt/arg_groups/"
                f"validation_hook.py\", line 179, in check_server_args\n{refused}\n")
        return 1
    pd_config.before_startup(args, log)  # 0.5.23 refuses `fake` on a prefill server here
    cfg = resolve(args, sim, get_profile(sim.profile), parse_faults(sim.faults))
    if sim.launch_counter:
        with open(sim.launch_counter, "a") as f:
            f.write(f"{os.getpid()}\n")
    _warn_passthrough(log, cfg)
    node = Node.from_args(args)
    group = Rendezvous(node, log, sim.time_scale) if node.multi_node else None
    startup = Startup(cfg, log, args.port, init_parallel=group.join if group else None)
    startup.run()
    if group is not None:
        group.barrier()
        if node.node_rank:  # no tokenizer, no API: a dummy health check until rank 0 stops (engine.py:1234)
            return group.serve_follower(args.host, args.port, args.enable_metrics)
    engine = Engine(
        capacity=cfg.max_total_num_tokens * args.dp_size,
        max_running=cfg.max_running_requests * args.dp_size,
        speed=_speed(cfg, log),
        time_scale=sim.time_scale,
        chunked_prefill=cfg.chunked_prefill_size,
        host_capacity=cfg.host_pool.tokens if cfg.host_pool else 0,
        radix=not args.disable_radix_cache,
    )
    engine.spec = speculative.from_config(cfg)
    engine.stalled_rank, engine.dp_size = cfg.faults.production.stalled_dp_rank, args.dp_size
    engine.stall_after, engine.kv_leak = cfg.faults.production.stall_after, cfg.faults.production.kv_leak_tokens
    if args.hicache_storage_backend == "file" and cfg.host_pool is not None:  # L3 sits behind the host tier
        engine.storage = FileTier(storage_dir(args.hicache_storage_backend_extra_config),
                                  model=cfg.served_model_name, faults=cfg.faults.specs)
        log.info(f"Created HiCacheFile storage directory at {engine.storage.directory}")
    if engine.stalled_rank is not None and engine.stalled_rank >= args.dp_size:  # would stall nothing
        raise SystemExit(f"--sim-fault stalled-dp-rank:{engine.stalled_rank}: no such rank with --dp-size "
                         f"{args.dp_size} (ranks 0 to {args.dp_size - 1}); add --dp-size {engine.stalled_rank + 1}")
    low_rank = cfg.faults.production.spec_rank_low
    if low_rank is not None and low_rank >= args.dp_size:  # would lower nothing
        raise SystemExit(f"--sim-fault spec-rank-low:{low_rank}: no such rank with --dp-size {args.dp_size} (ranks 0 "
                         f"to {args.dp_size - 1}); add --dp-size {low_rank + 1}")
    state = State(
        cfg=cfg,
        engine=engine,
        log=log,
        trace=Trace(sim.trace),
        argv=argv,
        port=args.port,
        times=startup.times,
        status=STARTING,
        storage_backend=args.hicache_storage_backend,
    )
    state.rng.seed(cfg.random_seed)
    engine.on_finish = state.trace.request
    asyncio.run(_serve(state))
    if group is not None:
        group.shutdown()  # rank 0's ShutdownReq broadcast: the other node ranks exit 0
    return 0
