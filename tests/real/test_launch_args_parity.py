"""Our one parse of launch args against SGLang 0.5.23's own parser: the same fields, the same rejections.

The token map decides what is masked (``--api-ke K``) and what the docker runner replaces
(``--po=N``), so it must read every argv exactly as ``python -m sglang.launch_server`` would.
No server is started: SGLang's parser is built in its own interpreter and fed the same argvs.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from realsgl import RealSetup

from pytest_sglang.errors import ConfigError
from pytest_sglang.sglang.args import parse_launch_args

pytestmark = pytest.mark.real_sglang

ARGVS = [
    ["--api-ke", "K1", "--tp", "8"],
    ["--api-key=K2", "--api-ke=K3", "--po", "4000", "--ho=0.0.0.0"],
    ["--admin-api", "K4", "--ssl-keyfile-pass", "K5", "--watermark-conf", "{}"],
    ["--lora-paths", "a", "b=c", "--tp", "2"],
    ["--no-enable-tf32-matmul", "--enable-hicache", "--hicache-size", "4"],
    ["--model-checksum", "--tp", "2"],
    ["--tp", "2", "--", "--api-key", "K6"],
    ["--mem-frac", "0.8", "--hicache-ratio", "-1"],
    ["--context-length", "64k", "--max-total-tokens", "1Mi"],
    ["--tensor-parallel", "2", "--ep", "2", "--nccl-init", "x:1"],
    ["--pp", "2"],
    ["--a=K7"],
    ["--enable-hi"],
    ["--tp", "abc"],
    ["--max-total-tokens", "1m"],
    ["--hicache-write-policy", "write_thru"],
    ["--api-key"],
]

REAL = """
import argparse, json, sys
from sglang.srt.server_args import ServerArgs
parser = argparse.ArgumentParser()
ServerArgs.add_cli_args(parser)
out = []
for argv in json.loads(sys.stdin.read()):
    try:
        ns, extra = parser.parse_known_args(argv)
    except SystemExit:
        out.append(None)
        continue
    given = sorted(k for k, v in vars(ns).items() if v != parser.get_default(k))
    out.append({"given": given, "extra": extra, "api_key": ns.api_key})
print(json.dumps(out))
"""


def _real(setup: RealSetup, argvs: list[list[str]]) -> list[dict[str, object] | None]:
    env = {**os.environ, "SGLANG_USE_CPU_ENGINE": "1"}
    done = subprocess.run([str(setup.python), "-c", REAL], input=json.dumps(argvs), capture_output=True,
                          text=True, timeout=300, env=env, cwd=Path(setup.python).parent, check=True)
    result: list[dict[str, object] | None] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_the_token_map_reads_argvs_as_sglang_does(real_setup: RealSetup) -> None:
    argvs = [["--model-path", "m", *argv] for argv in ARGVS]
    for argv, real in zip(argvs, _real(real_setup, argvs), strict=True):
        try:
            ours = parse_launch_args(argv)
        except ConfigError:
            assert real is None, f"SGLang accepts {argv}, we reject it"
            continue
        assert real is not None, f"SGLang rejects {argv}, we accept it"
        dests = {t.dest for t in ours.tokens if t.dest is not None}
        assert set(real["given"]) <= dests, argv  # type: ignore[arg-type]
        assert list(ours.unknown) == real["extra"], argv
        assert ours.api_key == real["api_key"], argv
