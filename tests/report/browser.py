"""A tiny Chrome DevTools Protocol client (aiohttp websockets) and a pure-Python PNG decoder.

Used to open the HTML report in Debian's headless chromium: record every network request and
console message, measure where the charts are, and take a full-page screenshot.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import shutil
import signal
import struct
import subprocess
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-breakpad",  # no crash handler: one helper fewer outliving the browser
    "--disable-crash-reporter",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--mute-audio",
    "--hide-scrollbars",
    "--remote-debugging-port=0",
]


@dataclass
class PageResult:
    requests: list[str] = field(default_factory=list)
    console: list[str] = field(default_factory=list)
    boxes: dict[str, dict[str, float]] = field(default_factory=dict)
    png: bytes = b""
    width: int = 0
    height: int = 0


def open_page(path: Path, log_path: Path, timeout_s: float = 60.0) -> PageResult:
    profile = Path(tempfile.mkdtemp(prefix="pytest-sglang-chromium-"))
    try:
        with log_path.open("wb") as log:
            # A session of its own: chromium's helpers (zygotes, renderers, utility processes) stay
            # in it even when re-parented, so a stop can find and wait for every one of them.
            proc = subprocess.Popen(
                [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            try:
                port = _devtools_port(profile, proc, timeout_s)
                return asyncio.run(asyncio.wait_for(_drive(port, path.resolve().as_uri()), timeout_s))
            finally:
                left = stop_tree(proc)
                assert not left, f"chromium processes still alive after SIGKILL: {left}"
    finally:
        # Only after every process is gone: a helper still writing into the profile made rmtree fail
        # with "Directory not empty: 'Default'".
        shutil.rmtree(profile)


def session_members(sid: int) -> list[psutil.Process]:
    """The live processes of session ``sid``: its leader's tree and helpers re-parented away from it."""
    found: dict[int, psutil.Process] = {}
    with contextlib.suppress(psutil.NoSuchProcess):
        root = psutil.Process(sid)
        found = {p.pid: p for p in (root, *root.children(recursive=True))}
    for p in psutil.process_iter():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if p.pid not in found and os.getsid(p.pid) == sid:
                found[p.pid] = p
    return [p for p in found.values() if _running(p)]


def stop_tree(proc: subprocess.Popen[bytes], timeout_s: float = 10.0) -> list[str]:
    """Stop ``proc`` (started in a session of its own) and its whole session; wait until each has exited.

    SIGTERM to the process group first (chromium then shuts its helpers down), SIGKILL to whatever is
    left after ``timeout_s``. Returns the processes still running after that (none, unless the kernel
    is stuck). A zombie counts as exited: it holds no files (a container's PID 1 may never reap it).
    """
    members = session_members(proc.pid)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout_s)
    helpers = {p.pid: p for p in members if p.pid != proc.pid}
    helpers.update({p.pid: p for p in session_members(proc.pid) if p.pid != proc.pid})  # started while stopping
    alive = _wait_gone(list(helpers.values()), timeout_s)
    for p in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    return [f"{p.pid} {p.name()}" for p in _wait_gone(alive, timeout_s)]


def _running(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_gone(procs: list[psutil.Process], timeout_s: float) -> list[psutil.Process]:
    """Poll until none of ``procs`` runs (they need not be our children), or ``timeout_s``: those left."""
    deadline = time.monotonic() + timeout_s
    while True:
        alive = [p for p in procs if _running(p)]
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.05)


def _devtools_port(profile: Path, proc: subprocess.Popen[bytes], timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    marker = profile / "DevToolsActivePort"
    while time.monotonic() < deadline:
        if marker.exists() and marker.read_text().strip():
            return int(marker.read_text().splitlines()[0])
        if proc.poll() is not None:
            raise RuntimeError(f"chromium exited with {proc.returncode} before DevTools was up")
        time.sleep(0.1)
    raise TimeoutError("chromium DevTools port did not appear")


async def _drive(port: int, url: str) -> PageResult:
    import aiohttp

    result = PageResult()
    ids = itertools.count(1)
    async with aiohttp.ClientSession() as http:
        async with http.put(f"http://127.0.0.1:{port}/json/new?about:blank") as resp:
            target = json.loads(await resp.text())
        async with http.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            pending: dict[int, asyncio.Future[Any]] = {}
            loaded = asyncio.Event()

            async def reader() -> None:
                async for msg in ws:
                    data = json.loads(msg.data)
                    if "id" in data and data["id"] in pending:
                        pending.pop(data["id"]).set_result(data)
                    else:
                        _event(data, result, loaded)

            async def call(method: str, **params: Any) -> Any:
                n = next(ids)
                fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
                pending[n] = fut
                await ws.send_json({"id": n, "method": method, "params": params})
                data = await fut
                if "error" in data:
                    raise RuntimeError(f"{method}: {data['error']}")
                return data.get("result", {})

            task = asyncio.create_task(reader())
            for domain in ("Network", "Runtime", "Log", "Page"):
                await call(f"{domain}.enable")
            await call(
                "Emulation.setDeviceMetricsOverride",
                width=1200,
                height=900,
                deviceScaleFactor=1,
                mobile=False,
            )
            await call("Page.navigate", url=url)
            await asyncio.wait_for(loaded.wait(), 30)
            await asyncio.sleep(0.5)  # late console errors and requests
            boxes = await call("Runtime.evaluate", returnByValue=True, expression=_BOXES_JS)
            result.boxes = boxes["result"]["value"]
            size = await call(
                "Runtime.evaluate",
                returnByValue=True,
                expression="[document.documentElement.scrollWidth, document.documentElement.scrollHeight]",
            )
            result.width, result.height = size["result"]["value"]
            await call(
                "Emulation.setDeviceMetricsOverride",
                width=result.width,
                height=result.height,
                deviceScaleFactor=1,
                mobile=False,
            )
            shot = await call("Page.captureScreenshot", format="png")
            result.png = base64.b64decode(shot["data"])
            task.cancel()
    return result


_BOXES_JS = """Object.fromEntries([...document.querySelectorAll('svg.chart')].map(e => {
  const r = e.getBoundingClientRect();
  return [e.dataset.chart, {x: r.x + window.scrollX, y: r.y + window.scrollY, w: r.width, h: r.height}];
}))"""


def _event(data: dict[str, Any], result: PageResult, loaded: asyncio.Event) -> None:
    method, params = data.get("method", ""), data.get("params", {})
    if method == "Network.requestWillBeSent":
        result.requests.append(params["request"]["url"])
    elif method == "Runtime.consoleAPICalled":
        result.console.append(f"console.{params.get('type')}: {params.get('args')}")
    elif method == "Runtime.exceptionThrown":
        result.console.append(f"exception: {params.get('exceptionDetails')}")
    elif method == "Log.entryAdded":
        entry = params.get("entry", {})
        result.console.append(f"log.{entry.get('level')}: {entry.get('text')} {entry.get('url', '')}")
    elif method == "Page.loadEventFired":
        loaded.set()


def decode_png(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB(A) bytes) for 8-bit RGB/RGBA non-interlaced PNGs."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and color in (2, 6) and interlace == 0, (depth, color, interlace)
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        _unfilter(kind, line, prev, channels)
        rows.append(bytes(line))
        prev = line
    return width, height, [_rgb(r, channels) for r in rows]


def _unfilter(kind: int, line: bytearray, prev: bytearray, bpp: int) -> None:
    for i in range(len(line)):
        a = line[i - bpp] if i >= bpp else 0
        b = prev[i]
        c = prev[i - bpp] if i >= bpp else 0
        if kind == 1:
            line[i] = (line[i] + a) & 0xFF
        elif kind == 2:
            line[i] = (line[i] + b) & 0xFF
        elif kind == 3:
            line[i] = (line[i] + (a + b) // 2) & 0xFF
        elif kind == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF


def _rgb(row: bytes, channels: int) -> bytes:
    return row if channels == 3 else bytes(v for i, v in enumerate(row) if i % 4 != 3)


def ink(rows: list[bytes], box: dict[str, float]) -> tuple[int, int]:
    """(non-white pixels, colored pixels) inside a box: text is grey/black, data is colored."""
    dark = colored = 0
    for y in range(int(box["y"]), int(box["y"] + box["h"])):
        row = rows[y]
        for x in range(int(box["x"]), int(box["x"] + box["w"])):
            r, g, b = row[3 * x], row[3 * x + 1], row[3 * x + 2]
            if r < 235 or g < 235 or b < 235:
                dark += 1
                if max(r, g, b) - min(r, g, b) > 60:
                    colored += 1
    return dark, colored


def chromium_available() -> bool:
    return os.access(CHROMIUM, os.X_OK)


def encode_png(rows: list[bytes], width: int) -> bytes:
    """RGB rows -> PNG bytes (to save crops of a screenshot for people to look at)."""
    raw = b"".join(b"\x00" + r[: width * 3] for r in rows)

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body))
            + kind
            + body
            + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)
        )

    header = struct.pack(">IIBBBBB", width, len(rows), 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )
