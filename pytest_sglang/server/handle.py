"""``SGLangServer``: one handle, the same shape whether attached or launched (STYLE.md habit 13)."""

from __future__ import annotations

import threading
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from pytest_sglang import redaction
from pytest_sglang.errors import ServerUnavailable, SGLangError
from pytest_sglang.server import cleanup
from pytest_sglang.server.base import DEFAULT_GRACE_S, ExitStatus, RunningProcess
from pytest_sglang.server.client import MAX_BODY_BYTES, as_server_url, make_client
from pytest_sglang.server.config import LaunchConfig
from pytest_sglang.server.phases import StartupReport, log_tail
from pytest_sglang.server.probe import HEALTH_PROBE_TIMEOUT_S
from pytest_sglang.server.readiness import check_info, excerpt
from pytest_sglang.server.url import ServerURL
from pytest_sglang.sglang import masks
from pytest_sglang.sglang import metrics_text as promtext
from pytest_sglang.sglang.args import LaunchArgs


class SGLangServer:
    """A ready SGLang server: attached (``mode="attach"``) or launched (process/simulator/docker).

    ``url`` is the clean base URL (never credentials), ``server_url`` the parsed address whose
    ``str()`` masks a password. ``api_key`` is available to code that needs it (the load generator)
    but never printed: ``repr()`` and every message leave it out.
    """

    def __init__(self, url: str | ServerURL, mode: str, *, config: LaunchConfig | None = None,
                 launch_args: LaunchArgs | None = None, process: RunningProcess | None = None,
                 startup: StartupReport | None = None, api_key: str | None = None, validate: str = "strict",
                 info_endpoint: str = "/server_info", initial_info: dict[str, Any] | None = None) -> None:
        """Wrap a ready server; :func:`start_server` builds these."""
        self.server_url = as_server_url(url)
        self.url = self.server_url.base
        self.mode = mode
        self.config = config
        self.launch_args = launch_args
        self.process = process
        self.startup = startup
        self.api_key = api_key
        self.validate = validate
        self.info_endpoint = info_endpoint
        self.initial_info = masks.scrub_payload(initial_info) if initial_info is not None else None
        self._stop_lock = threading.Lock()
        self._stopped = False

    @property
    def log_path(self) -> Path | None:
        """The launched server's log file, or None when attached."""
        return self.process.log_path if self.process is not None else None

    def __repr__(self) -> str:
        """The address (password masked), mode and process; never the API key."""
        where = f", {self.process.describe()}" if self.process is not None else ""
        return f"<SGLangServer {self.server_url} mode={self.mode}{where}>"

    def describe(self) -> str:
        """The :func:`repr` text without its angle brackets."""
        return repr(self)[1:-1]

    # The Handle protocol (server/members.py): a lone server is its own one member.
    @property
    def server(self) -> SGLangServer:
        """This server itself (as a member of its handle it is always talked to directly)."""
        return self

    @property
    def unreachable(self) -> None:
        """None: a lone server is reached directly (attach and launch check that before handing it out)."""
        return None

    @property
    def role(self) -> str:
        """``regular``: a lone server serves whole requests."""
        return "regular"

    def label(self) -> None:
        """None: a lone server's records keep their plain metric names."""
        return None

    def fact(self, name: str) -> None:
        """None: no gateway lists facts about a lone server (its own are in :meth:`info`)."""
        return None

    def metrics_or_why(self, timeout_s: float | None = None) -> dict[str, list[promtext.Sample]] | str:
        """:meth:`metrics` (read within ``timeout_s`` when given), or the first line of why they cannot be read."""
        try:
            return self.metrics(timeout_s)
        except SGLangError as exc:
            return str(exc).splitlines()[0]

    def members(self) -> tuple[SGLangServer]:
        """``(self,)``: a lone server is its own one member."""
        return (self,)

    def client(self, *, timeout: httpx.Timeout | float | None = None, headers: dict[str, str] | None = None,
               max_body_bytes: int | None = MAX_BODY_BYTES) -> httpx.Client:
        """A new httpx client bound to the server, authenticated, bodies capped (caller closes it).

        Authentication: the API key as Bearer, else the URL's user:password as Basic auth.
        """
        return make_client(self.server_url, self.api_key, timeout=timeout, headers=headers,
                           max_body_bytes=max_body_bytes)

    def info(self) -> dict[str, Any]:
        """``/server_info`` now, validated per ``validate`` and with secrets redacted."""
        with self.client() as client:
            response = self._get(client, self.info_endpoint)
            if response.status_code == 404 and self.info_endpoint == "/server_info":
                self.info_endpoint = "/get_server_info"
                response = self._get(client, self.info_endpoint)
        if response.status_code != 200:
            body = excerpt(response.text)
            raise ServerUnavailable(f"{self.describe()}: GET {self.info_endpoint} answered "
                                    f"{response.status_code}{f': {body!r}' if body else ''}\nFix: check that the "
                                    "server is healthy (its /health) and the API key (--sglang-api-key) is right.")
        payload = check_info(response, self.info_endpoint, self.validate)
        info: dict[str, Any] = masks.scrub_payload(payload if payload is not None else {})
        return info

    def health(self, timeout_s: float = HEALTH_PROBE_TIMEOUT_S) -> int:
        """The status code of ``GET /health`` (200 healthy, 503 starting/unhealthy/draining)."""
        with self.client(timeout=httpx.Timeout(timeout_s, connect=5.0)) as client:
            return self._get(client, "/health").status_code

    def metrics(self, timeout_s: float | None = None) -> dict[str, list[promtext.Sample]]:
        """``/metrics`` parsed (prometheus_client's parser), keyed by sample name; ``timeout_s`` bounds the read."""
        with self.client(timeout=timeout_s) as client:
            response = self._get(client, "/metrics")
        if response.status_code == 404:
            raise ServerUnavailable(f"{self.describe()}: GET /metrics answered 404: metrics are disabled.\n"
                                    "Fix: add --enable-metrics to the SGLang launch args (--sglang-launch).")
        if response.status_code != 200:
            raise ServerUnavailable(f"{self.describe()}: GET /metrics answered {response.status_code}.\n"
                                    "Fix: check the server's health and log.")
        try:
            return promtext.parse(response.text)
        except ValueError as exc:  # prometheus_client's parser: never its traceback
            raise ServerUnavailable(f"{self.describe()}: GET /metrics is not Prometheus text ({excerpt(str(exc))}); "
                                    f"body: {excerpt(response.text, 80)!r}\nFix: point the URL at the SGLang "
                                    "server itself (a proxy may rewrite /metrics).") from None

    def _get(self, client: httpx.Client, path: str) -> httpx.Response:
        try:
            return client.get(path)
        except httpx.TransportError as exc:
            status = self.exit_status()
            gone = f" (the server {status.describe()})" if status is not None else ""
            raise ServerUnavailable(redaction.scrub(
                f"{self.describe()}: GET {path} failed: {type(exc).__name__}: {excerpt(str(exc))}{gone}\n"
                "Fix: read the server log (log_tail()) for why it stopped answering.")) from None

    def log_tail(self, n: int = 30) -> list[str]:
        """The last ``n`` lines of the server log, secrets masked (empty when attached)."""
        return log_tail(self.log_path, n)

    def exit_status(self) -> ExitStatus | None:
        """None while running (or when attached); how the launched server ended otherwise."""
        return self.process.exit_status() if self.process is not None else None

    def stop(self, grace_s: float = DEFAULT_GRACE_S) -> ExitStatus | None:
        """Stop a launched server and all its processes (idempotent); an attached server is left alone."""
        with self._stop_lock:
            if self.process is None:
                return None
            if not self._stopped:
                self._stopped = True
                try:
                    self.process.stop(grace_s)
                finally:
                    cleanup.untrack(self.process)
            return self.process.exit_status()

    def adopt(self, fresh: SGLangServer) -> None:
        """Take over ``fresh``'s process and startup (a restart on the same address, :mod:`.restart`)."""
        if fresh.url != self.url:
            raise ValueError(f"cannot adopt a server at {fresh.server_url}: this handle is {self.server_url}")
        with self._stop_lock:
            self.process, self.startup, self._stopped = fresh.process, fresh.startup, False
            self.initial_info = fresh.initial_info

    def __enter__(self) -> SGLangServer:
        """Return the server; leaving the block stops it."""
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        """Stop the server."""
        self.stop()
