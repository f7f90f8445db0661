"""gsm8k and mmlu from the Hugging Face hub: its parquet layout, its cache, offline and unreachable hubs, bounds.

The hub itself is never contacted: the layout is read from small parquet files written like the hub's
(data/make_hub_files.py), the hub is ``HF_ENDPOINT`` pointed at a loopback stand-in (conftest
``fake_hub``) or at a closed port, and offline is ``HF_HUB_OFFLINE=1``. huggingface_hub reads its
environment at import, so those runs go through ``python -m pytest_sglang eval`` subprocesses.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_sglang.accuracy import gsm8k, hub, mmlu
from pytest_sglang.errors import ConfigError
from tests.accuracy.fakehub import COMMIT, FakeHub
from tests.conftest import SimFactory

HUB = Path(__file__).parent / "data" / "hub"
GSM8K_PARQUET = HUB / "openai-gsm8k" / "main" / "test-00000-of-00001.parquet"
MMLU_DIR = HUB / "cais-mmlu" / "all"


def _eval(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_sglang", "eval", *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **env})


def _cache(root: Path, repo: str, files: dict[str, Path]) -> Path:
    """A hub cache holding ``files`` of dataset ``repo`` at ``main`` (the layout huggingface_hub writes)."""
    top = root / f"datasets--{repo.replace('/', '--')}"
    (top / "refs").mkdir(parents=True, exist_ok=True)
    (top / "refs" / "main").write_text(COMMIT)
    for name, source in files.items():
        target = top / "snapshots" / COMMIT / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, target)
    return root


def test_gsm8k_reads_the_hubs_parquet_layout() -> None:
    rows = gsm8k.read_rows(GSM8K_PARQUET)
    assert [r.target for r in rows] == ["18", "42", "56", "1234", "45"]
    assert rows[0].question.startswith("Janet\u2019s ducks lay 16 eggs per day.") and rows[0].answer.endswith("#### 18")


def test_mmlu_reads_the_hubs_parquet_layout_with_dev_shots() -> None:
    rows, pool = mmlu.read(MMLU_DIR / "test-00000-of-00001.parquet")
    assert [(r.subject, r.target) for r in rows] == [("abstract algebra", "B"), ("anatomy", "D"),
                                                      ("elementary mathematics", "B")]
    assert rows[1].choices[3] == "The second and third pharyngeal arches"
    assert [p.question for p in pool] == ["Find the degree for the given field extension Q(sqrt(2), sqrt(3)) over Q.",
                                          "What is 1 + 1?"]
    task = mmlu.task(MMLU_DIR / "test-00000-of-00001.parquet", "all", 1)
    prompt = task.prompt(task.examples[2], task.shots_for(task.examples[2], 1))
    assert prompt.startswith("The following are multiple choice questions (with answers) about elementary "
                             "mathematics.\n\nWhat is 1 + 1?\nA. 1\nB. 2\nC. 3\nD. 4\nAnswer: B\n\n")


def test_bad_parquet_files_name_the_file_and_the_layout(tmp_path: Path) -> None:
    fake = tmp_path / "test-00000-of-00001.parquet"
    fake.write_text('{"question": "q", "answer": "#### 1"}\n')
    with pytest.raises(ConfigError, match=r"gsm8k data=.*cannot be read as parquet with columns question, answer"):
        gsm8k.read_rows(fake)
    with pytest.raises(ConfigError, match=r"cannot be read as parquet with columns question, subject, choices"):
        mmlu.read(GSM8K_PARQUET)  # gsm8k's file has no choices column
    with pytest.raises(ConfigError, match=r"needs no_such_module_xyz to load its data.*pytest-sglang\[eval\]"):
        hub.require("no_such_module_xyz", "gsm8k")


@pytest.mark.parametrize("task", ["gsm8k", "mmlu"])
def test_offline_without_a_cached_copy_names_the_task_the_hub_and_the_fix(task: str, tmp_path: Path) -> None:
    run = _eval("--url", "http://127.0.0.1:9", "--task", task, HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(tmp_path))
    assert run.returncode == 3, run.stderr
    repo = {"gsm8k": "openai/gsm8k/main", "mmlu": "cais/mmlu/all"}[task]
    assert f"error: --task='{task}': has no local data file and the Hugging Face hub is unreachable: HF_HUB_OFFLINE " \
           f"is set and {repo}/test-00000-of-00001.parquet is not in the hub cache {tmp_path}. Fix: pass a local " \
           "file: --sglang-eval-data PATH (eval --data PATH)" in run.stderr
    assert "Traceback" not in run.stderr


def test_an_unreachable_hub_fails_at_once_with_the_fix(tmp_path: Path) -> None:
    start = time.monotonic()
    run = _eval("--url", "http://127.0.0.1:9", "--task", "gsm8k", HF_ENDPOINT="http://127.0.0.1:9",
                HF_HUB_CACHE=str(tmp_path))
    assert time.monotonic() - start < 20  # one probe, not huggingface_hub's five retries with backoff
    assert run.returncode == 3
    assert "the Hugging Face hub is unreachable: HEAD http://127.0.0.1:9/datasets/openai/gsm8k/resolve/main/main/" \
           "test-00000-of-00001.parquet failed (ConnectError" in run.stderr
    assert 'Fix: pass a local file: --sglang-eval-data PATH (eval --data PATH), gsm8k JSONL ({"question"' in run.stderr


def test_gsm8k_downloads_from_the_hub_then_runs_offline_from_its_cache(sim_factory: SimFactory, fake_hub: FakeHub,
                                                                       tmp_path: Path) -> None:
    url, out = sim_factory().url, tmp_path / "r.json"
    cache = tmp_path / "cache"
    run = _eval("--url", url, "--task", "gsm8k", "--shots", "1", "--num-examples", "all",
                "--json", str(out), HF_ENDPOINT=fake_hub.url,
                HF_HUB_CACHE=str(cache))
    assert run.returncode == 0, run.stderr
    assert "gsm8k: score 1.000 (4/4 correct" in run.stdout  # the shot row (Janet's ducks) is not scored
    source = f"hf://datasets/openai/gsm8k@{COMMIT}/main/test-00000-of-00001.parquet"
    assert json.loads(out.read_text())["harness"]["source"] == source
    assert "GET /datasets/openai/gsm8k/resolve/main/main/test-00000-of-00001.parquet" in fake_hub.requests
    fake_hub.requests.clear()
    again = _eval("--url", url, "--task", "gsm8k", "--shots", "1", "--num-examples", "all",
                  HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(cache))
    assert again.returncode == 0 and f"source={source}" in again.stdout and fake_hub.requests == []


def test_a_stalled_download_stops_at_the_deadline(fake_hub: FakeHub, tmp_path: Path) -> None:
    fake_hub.stall_get = True
    start = time.monotonic()
    run = _eval("--url", "http://127.0.0.1:9", "--task", "gsm8k", "--hub-timeout", "2", HF_ENDPOINT=fake_hub.url,
                HF_HUB_CACHE=str(tmp_path))
    assert time.monotonic() - start < 15
    assert run.returncode == 3
    assert "the Hugging Face hub is unreachable: downloading openai/gsm8k/main/test-00000-of-00001.parquet did " \
           "not finish within hub_timeout_s=2 (eval --hub-timeout)" in run.stderr


def test_a_file_larger_than_the_bound_is_not_downloaded(fake_hub: FakeHub, tmp_path: Path) -> None:
    fake_hub.announce_size = hub.MAX_PARQUET_BYTES + 1
    run = _eval("--url", "http://127.0.0.1:9", "--task", "gsm8k", HF_ENDPOINT=fake_hub.url, HF_HUB_CACHE=str(tmp_path))
    assert run.returncode == 3 and f"has {hub.MAX_PARQUET_BYTES + 1} bytes, more than the 64 MiB bound" in run.stderr
    assert not any(r.startswith("GET") for r in fake_hub.requests)


def test_mmlu_from_the_hub_cache_uses_its_dev_split_for_shots(sim_factory: SimFactory, tmp_path: Path) -> None:
    cache = _cache(tmp_path / "cache", "cais/mmlu", {"all/test-00000-of-00001.parquet": MMLU_DIR /
                                                     "test-00000-of-00001.parquet",
                                                     "all/dev-00000-of-00001.parquet": MMLU_DIR /
                                                     "dev-00000-of-00001.parquet"})
    out = tmp_path / "r.json"
    run = _eval("--url", sim_factory().url, "--task", "mmlu", "--shots", "1", "--num-examples", "all",
                "--json", str(out),
                HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(cache))
    assert run.returncode == 0, run.stderr
    doc = json.loads(out.read_text())
    assert doc["total"] == 3 and doc["harness"]["template"] == "mmlu-few-shot"  # dev rows are shots, not scored
    assert doc["harness"]["source"] == f"hf://datasets/cais/mmlu@{COMMIT}/all/test-00000-of-00001.parquet"
