"""The engine's defaults and choices, declared once.

The engine (``server.config.LaunchConfig``/``DockerOptions``, the docker runner) and the plugin's
option rows (``plugin.settings.OPTIONS``) both read these names. They live in this import-free module,
not in ``server/config.py``, because importing anything under ``pytest_sglang.server`` runs that
package's ``__init__`` (httpx, tenacity, ...), and the plugin reads these at pytest start-up, where
every millisecond is paid by every run, also in projects that do not use the plugin.
"""

from __future__ import annotations

RUNNERS = ("process", "simulator", "docker")
DEFAULT_RUNNER = "process"
VALIDATE_MODES = ("strict", "warn", "off")
DEFAULT_VALIDATE = "strict"
#: One deadline for a whole start (launch, load weights, capture graphs, warm up), in seconds.
DEFAULT_STARTUP_TIMEOUT_S = 1800.0
#: Seconds an idle HTTP connection is kept for reuse. SGLang's uvicorn closes idle connections after
#: 5 s (SGLANG_TIMEOUT_KEEP_ALIVE) and httpx keeps them 5 s too: a reuse could race the server's close
#: and fail with "connection reset". Well below 5 s, the client always drops first.
CLIENT_KEEPALIVE_S = 2.0
#: Host memory (decimal GB) the hicache preflight keeps free for everything else on the host.
DEFAULT_HOST_MEMORY_RESERVE_GB = 10.0

# docker runner
DEFAULT_GPUS = "all"
#: ``/dev/shm`` of the container, as SGLang's docs recommend for its image.
DEFAULT_SHM_SIZE = "32g"
DEFAULT_IPC_HOST = True
PULL_POLICIES = ("always", "missing", "never")
DEFAULT_PULL = "missing"

# fleets
#: ``--sglang-fleet-direct``: probe a gateway's workers directly (auto: where reachable).
FLEET_DIRECT_MODES = ("auto", "require", "off")
DEFAULT_FLEET_DIRECT = "auto"
#: Ray's placement-group strategy for launched servers (``ray.util.placement_group``).
DEFAULT_RAY_STRATEGY = "PACK"

# the acceptance suite (``correctness.AcceptanceSettings`` and the ``--sglang-acceptance-*`` rows)
ACCEPTANCE_SAMPLES = 8
ACCEPTANCE_MAX_TOKENS = 16
ACCEPTANCE_REQUEST_TIMEOUT_S = 60.0
ACCEPTANCE_MIN_MATCH_RATE = 0.8
ACCEPTANCE_MAX_KL = 0.02
#: The vision encoder's most share of a new 720p image's first token: past it the encoder takes longer than the
#: rest of the first token; healthy Kimi-K2.5 is ~8 % by compute (docs/multimodal.md has the arithmetic).
ACCEPTANCE_MAX_VISION_SHARE = 0.5
ACCEPTANCE_CONCURRENCY = 16
ACCEPTANCE_DISCONNECT_TIMEOUT_S = 30.0
#: One acceptance check may take this long in all (its samples, retries and waits), the suite this long.
ACCEPTANCE_CHECK_TIMEOUT_S = 600.0
ACCEPTANCE_SUITE_TIMEOUT_S = 3600.0

# consent: a load on an attached server above this many tokens (requests x (input_len + output_len))
# needs --sglang-allow-disruptive. 1,000,000 tokens is just under README's throughput recipe (256 requests
# of 4,000 + 512 tokens = 1.16 M): minutes of a production server's whole batch, not a probe.
HEAVY_LOAD_TOKENS = 1_000_000

#: ``--sglang-suggest-floors``: a floor at 50 % below (a ceiling 50 % above) the worst end of what was
#: measured covers another machine load or another day (``--sglang-suggest-floors-margin``).
SUGGESTED_FLOORS_MARGIN = 0.5
