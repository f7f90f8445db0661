"""``runner="sgl-eval"``: a real sgl-eval 0.1.3 subprocess against the simulator; the verdict is the plugin's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from pytest_sglang.accuracy import EvalRunError, Harness, evaluate, judge
from pytest_sglang.errors import ConfigError, ServerUnavailable
from tests.conftest import SimFactory

DATA = Path(__file__).parent / "data"
#: The simulator ends its answers with "#### N" and ignores sgl-eval's \boxed{} instruction; this
#: --prompt makes sgl-eval's own grader read "#### N" (see data/hash-answer.yaml).
HASH_PROMPT = ["--prompt", str(DATA / "hash-answer.yaml")]


def _sgl_eval_processes(marker: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter():
        try:
            if any(marker in part for part in proc.cmdline()):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def test_sgl_eval_scores_the_plugins_examples_and_the_plugin_judges(sim_factory: SimFactory,
                                                                     sgl_eval_exe: Path, tmp_path: Path) -> None:
    seen: list[tuple[int, int, int]] = []
    result = evaluate(sim_factory().url, Harness(task="arithmetic", num_examples=30), runner="sgl-eval",
                      sgl_eval=sgl_eval_exe, sgl_eval_args=HASH_PROMPT, work_dir=tmp_path,
                      progress=lambda *a: seen.append(a))
    assert (result.correct, result.total, result.errors, result.invalid) == (30, 30, 0, 0)
    assert judge(result, min_score=0.9) == []
    assert seen and seen[-1] == (30, 30, 30)
    h = result.harness
    assert (h["runner"], h["sgl_eval_version"], h["benchmark"], h["route"], h["shots"]) == (
        "sgl-eval", "0.1.3", "gsm8k", "chat", 0)
    assert h["template"].startswith("sgl-eval:gsm8k prompt=hash-answer.yaml sha256:")
    assert h["extra_args"] == ["--prompt", "hash-answer.yaml"] and h["source"] == "generated, seed 1234"
    # What sgl-eval itself wrote: it scored exactly the plugin's 30 generated questions, zero-shot.
    (run,) = tmp_path.glob("sgl_eval_gsm8k_*")
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["aggregate"]["score"] == 1.0 and metrics["num_examples"] == 30 and metrics["n_repeats"] == 1
    first = json.loads((run / "output-rs0.jsonl").read_text().splitlines()[0])
    assert first["problem"].startswith("What is ") and first["symbolic_correct"] is True


def test_sgl_eval_never_fails_on_score_the_plugin_does(sim_factory: SimFactory, sgl_eval_exe: Path) -> None:
    """With wrong answers sgl-eval exits 0; the plugin fails the floor with the interval."""
    result = evaluate(sim_factory("--sim-fault", "wrong-answer:0.5").url, Harness(task="arithmetic", num_examples=60),
                      runner="sgl-eval", sgl_eval=sgl_eval_exe, sgl_eval_args=HASH_PROMPT)
    low, high = result.interval
    assert 0.25 < result.score < 0.75 and low < result.score < high
    assert judge(result, min_score=0.9) == [f"min_score=0.9 is above the interval's upper bound {high:.3f}: the "
                                            f"score {result.score:.3f} is below the floor beyond sampling error"]
    assert result.wrong and result.wrong[0]["extracted"] != result.wrong[0]["target"]


def test_unboxed_answers_score_nothing_under_sgl_evals_own_prompt(sim_factory: SimFactory,
                                                                 sgl_eval_exe: Path) -> None:
    """sgl-eval's gsm8k grader reads only \\boxed{}: answers without it are counted as 'without an answer'."""
    result = evaluate(sim_factory().url, Harness(task="arithmetic", num_examples=10), runner="sgl-eval",
                      sgl_eval=sgl_eval_exe)
    assert (result.correct, result.invalid, result.errors) == (0, 10, 0)
    assert result.harness["template"] == "sgl-eval:gsm8k" and result.harness["extra_args"] == []
    assert result.wrong[0]["output"].endswith(f"#### {result.wrong[0]['target']}")


def test_eval_command_runs_sgl_eval_on_mmlu_from_a_parquet_file(sim_factory: SimFactory, sgl_eval_exe: Path,
                                                              tmp_path: Path) -> None:
    out, keep = tmp_path / "r.json", tmp_path / "keep"
    run = subprocess.run([sys.executable, "-m", "pytest_sglang", "eval", "--url", sim_factory().url, "--task", "mmlu",
                          "--data", str(DATA / "hub" / "cais-mmlu" / "all" / "test-00000-of-00001.parquet"),
                          "--runner", "sgl-eval", "--sgl-eval", str(sgl_eval_exe), "--sgl-eval-dir", str(keep),
                          "--num-examples", "all", "--min-score", "0.6", "--json", str(out)],
                         capture_output=True, text=True, timeout=180)
    assert run.returncode == 1, run.stderr
    assert "mmlu: score 0.000 (0/3 correct, 3 without an answer" in run.stdout
    doc = json.loads(out.read_text())
    assert doc["harness"]["benchmark"] == "mmlu" and doc["harness"]["extraction"] == "sgl-eval multiple-choice grader"
    asked = [json.loads(line)["problem"] for line in (keep / "dataset.jsonl").read_text().splitlines()]
    assert asked[2] == "What is 2 + 2?\n\nA) 3\nB) 4\nC) 5\nD) 6"  # NeMo-Skills' get_mcq_fields layout
    assert (keep / "sgl-eval.log").exists()


def test_the_deadline_stops_sgl_eval_and_keeps_the_partial_count(sim_factory: SimFactory, sgl_eval_exe: Path,
                                                                 tmp_path: Path) -> None:
    slow = sim_factory("--sim-time-scale", "1", "--sim-decode-step-ms", "300")  # ~3 s per answer: ~60 s in all
    start = time.monotonic()
    with pytest.raises(EvalRunError) as info:  # 10 s: past sgl-eval's start-up (its imports take seconds)
        evaluate(slow.url, Harness(task="arithmetic", num_examples=40, concurrency=2), runner="sgl-eval",
                 sgl_eval=sgl_eval_exe, sgl_eval_args=HASH_PROMPT, timeout_s=10, work_dir=tmp_path)
    assert time.monotonic() - start < 10 + 15  # the deadline, then SIGINT's grace at most
    err = info.value
    assert "did not finish within timeout_s=10:" in str(err)
    assert "[partial]" in str(err)  # sgl-eval's own footer: SIGINT made it write its partial metrics
    assert err.partial is not None and 0 < err.partial.total < 40 and err.partial.correct == err.partial.total
    assert err.log_path == tmp_path / "sgl-eval.log"
    assert _sgl_eval_processes(str(tmp_path)) == []


def test_ctrl_c_stops_the_sgl_eval_tree(sim_factory: SimFactory, sgl_eval_exe: Path, tmp_path: Path) -> None:
    slow = sim_factory("--sim-time-scale", "1", "--sim-decode-step-ms", "300")
    proc = subprocess.Popen([sys.executable, "-m", "pytest_sglang", "eval", "--url", slow.url, "--task", "arithmetic",
                             "--num-examples", "40", "--concurrency", "2", "--runner", "sgl-eval", "--sgl-eval",
                             str(sgl_eval_exe), "--sgl-eval-dir", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    end = time.monotonic() + 60
    while not (tmp_path / "sgl-eval.log").exists() or not _sgl_eval_processes(str(tmp_path)):
        assert time.monotonic() < end and proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "interrupted" in err
    assert _sgl_eval_processes(str(tmp_path)) == []


def test_ctrl_c_as_sgl_eval_starts_stops_its_tree_even_outside_its_group(
        sim_factory: SimFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Ctrl-C after the fork and before Popen returns (seen in CI: the CLI test's SIGINT came while Popen
    # ran). The stand-in says when SIGINT reaches it (stop() ran on it) and leaves behind a descendant
    # in a session of its own, reparented: out of reach of the group's SIGKILL and of its process tree.
    fake = tmp_path / "sgl-eval"
    fake.write_text("#!/bin/sh\ntrap 'echo stopped by SIGINT; exit 130' INT\n"
                    f'( setsid {sys.executable} -c "import time; time.sleep(300)" "$0" & )\n'
                    "sleep 300 &\nwait\n")
    fake.chmod(0o755)
    url = sim_factory().url
    real_popen = subprocess.Popen

    def interrupted_popen(*args: object, **kwargs: object) -> subprocess.Popen[bytes]:
        proc: subprocess.Popen[bytes] = real_popen(*args, **kwargs)  # type: ignore[call-overload]
        end = time.monotonic() + 30
        while len(_sgl_eval_processes(str(fake))) < 2:  # sh (then sleep) and its setsid descendant
            assert time.monotonic() < end
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)  # as a terminal's Ctrl-C would, while Popen has not returned
        time.sleep(0.5)  # the signal's handler runs here, before the return
        return proc

    monkeypatch.setattr(subprocess, "Popen", interrupted_popen)
    with pytest.raises(KeyboardInterrupt):
        evaluate(url, Harness(task="arithmetic", num_examples=3), runner="sgl-eval", sgl_eval=fake,
                 work_dir=tmp_path / "work")
    monkeypatch.undo()
    assert _sgl_eval_processes(str(fake)) == []
    assert "stopped by SIGINT" in (tmp_path / "work" / "sgl-eval.log").read_text()


def test_a_crashing_sgl_eval_is_an_error_with_its_log(sim_factory: SimFactory, tmp_path: Path) -> None:
    fake = tmp_path / "sgl-eval"
    fake.write_text("#!/bin/sh\necho 'Traceback: something broke' >&2\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(EvalRunError, match=r"exited with code 1 and no metrics.json\.\nLast lines:\n"
                                           r"  Traceback: something broke\nFix: read the log above"):
        evaluate(sim_factory().url, Harness(task="arithmetic", num_examples=3), runner="sgl-eval", sgl_eval=fake,
                 work_dir=tmp_path / "work")
    assert (tmp_path / "work" / "dataset.jsonl").exists()  # kept, with its log, for reading


def test_an_unreachable_server_is_reported_before_sgl_eval_runs(sgl_eval_exe: Path) -> None:
    with pytest.raises(ServerUnavailable, match="GET /v1/models failed"):
        evaluate("http://127.0.0.1:9", Harness(task="arithmetic", num_examples=2), runner="sgl-eval",
                 sgl_eval=sgl_eval_exe)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"runner": "lm-eval"}, "runner='lm-eval': is not one of builtin, sgl-eval"),
    ({"sgl_eval": "/bin/sgl-eval"}, "sgl_eval='/bin/sgl-eval': applies to runner='sgl-eval' only"),
    ({"sgl_eval_args": ["--seed", "0"]}, r"sgl_eval_args=\['--seed', '0'\]: applies to runner='sgl-eval' only"),
    ({"timeout_s": 0}, "timeout_s=0: must be a number of seconds > 0"),
    ({"timeout_s": float("nan")}, "timeout_s=nan: must be a number"),
    ({"timeout_s": True}, "timeout_s=True: must be a number"),
    ({"runner": "sgl-eval", "sgl_eval": "/nonexistent/sgl-eval"},
     "sgl_eval='/nonexistent/sgl-eval': is not an executable file. Fix: install it in a venv of its own"),
    ({"runner": "sgl-eval", "sgl_eval": "SELF", "sgl_eval_args": ["--num-examples", "5"]},
     "--num-examples sets what the harness owns"),
    ({"runner": "sgl-eval", "sgl_eval": "SELF", "sgl_eval_args": ["--num-ex=5"]},
     "--num-ex sets what the harness owns"),
    ({"runner": "sgl-eval", "sgl_eval": "SELF", "sgl_eval_args": ["--out-dir", "/tmp"]},
     "--out-dir sets what the harness owns"),
    ({"runner": "sgl-eval", "sgl_eval": "SELF", "sgl_eval_args": "--seed 0"},
     "sgl_eval_args='--seed 0': must be a list of strings"),
])
def test_bad_runner_keywords_name_the_keyword_and_the_fix(kwargs: dict[str, object], message: str,
                                                          tmp_path: Path) -> None:
    if kwargs.get("sgl_eval") == "SELF":
        exe = tmp_path / "sgl-eval"
        exe.write_text("#!/bin/sh\nexit 0\n")
        exe.chmod(0o755)
        kwargs = {**kwargs, "sgl_eval": exe}
    with pytest.raises(ConfigError, match=message):
        evaluate("http://127.0.0.1:9", Harness(task="arithmetic", num_examples=2), **kwargs)  # type: ignore[arg-type]


def test_sgl_eval_asks_through_chat_only(sgl_eval_exe: Path) -> None:
    with pytest.raises(ConfigError, match="route='completions': is not what runner='sgl-eval' uses"):
        evaluate("http://127.0.0.1:9", Harness(task="arithmetic", route="completions"), runner="sgl-eval",
                 sgl_eval=sgl_eval_exe)


def test_a_missing_sgl_eval_names_the_runner_and_the_install(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(tmp_path)}  # no sgl-eval on PATH, nor beside this test's Python
    run = subprocess.run([sys.executable, "-m", "pytest_sglang", "eval", "--url", "http://127.0.0.1:9", "--task",
                          "arithmetic", "--runner", "sgl-eval"], capture_output=True, text=True, timeout=60, env=env)
    assert run.returncode == 2
    assert "--runner='sgl-eval': needs the sgl-eval executable, which is not on PATH. Fix: install it in a venv of " \
           "its own (python -m venv ~/sgl-eval && ~/sgl-eval/bin/pip install sgl-eval==0.1.3)" in run.stderr
    bad = subprocess.run([sys.executable, "-m", "pytest_sglang", "eval", "--url", "http://127.0.0.1:9", "--task",
                          "arithmetic", "--runner", "sgl-eval", "--sgl-eval-args", "--prompt 'x"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--sgl-eval-args=\"--prompt 'x\": cannot be split like a shell line" in bad.stderr
