"""What pytest-sglang costs a project that does not use it.

pytest loads every installed ``pytest11`` plugin, so a project that never asks for an SGLang server
still pays for importing and configuring ours. This makes a temporary project of trivial tests (no
SGLang option, no marker), runs ``python -m pytest --collect-only -q`` in it with the plugin and with
``-p no:sglang``, paired and interleaved (the order alternates within each pair so that drift on a
busy machine hits both sides alike), and prints both medians and their ratio. Goal: <= 1.05x.

Run: ``python benchmarks/bench_plugin_cost.py [--pairs 15] [--tests 100] [--bytecode on|off|env]``.
``--bytecode on`` (the default) caches compiled modules, as an installed package has them;
``off`` compiles every module (pytest's too) on every run. The cache lives in a temporary
``PYTHONPYCACHEPREFIX``, so the work tree gets no ``__pycache__``. Besides wall time it prints the
children's CPU time (POSIX), which a busy machine disturbs less.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL = 1.05


def make_project(root: Path, tests: int) -> None:
    """A project unrelated to SGLang: an empty ini (so it is its own rootdir) and trivial tests."""
    (root / "pytest.ini").write_text("[pytest]\n")
    body = "".join(f"def test_{n}():\n    assert {n} == {n}\n\n\n" for n in range(tests))
    (root / "test_trivial.py").write_text(body)


def environment(bytecode: str, cache: Path) -> dict[str, str]:
    env = dict(os.environ)
    if bytecode == "on":
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(cache)
    elif bytecode == "off":
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env["PYTHONPYCACHEPREFIX"] = str(cache)  # stays empty: nothing is read from a cache
    return env


def _children_cpu_s() -> float:
    if sys.platform == "win32":
        return 0.0
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one_run(root: Path, env: dict[str, str], *extra: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one pytest run."""
    argv = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *extra]
    cpu, start = _children_cpu_s(), time.perf_counter()
    done = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=120)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"pytest failed ({' '.join(extra) or 'with the plugin'}):\n{done.stdout}{done.stderr}")
    return elapsed, _children_cpu_s() - cpu


def measure(root: Path, env: dict[str, str], pairs: int) -> tuple[list[tuple[float, float]], ...]:
    with_plugin: list[tuple[float, float]] = []
    without: list[tuple[float, float]] = []
    one_run(root, env)  # warm the OS file cache (and the bytecode cache, when it is on)
    one_run(root, env, "-p", "no:sglang")
    for n in range(pairs):
        if n % 2:
            without.append(one_run(root, env, "-p", "no:sglang"))
            with_plugin.append(one_run(root, env))
        else:
            with_plugin.append(one_run(root, env))
            without.append(one_run(root, env, "-p", "no:sglang"))
    return with_plugin, without


def summary(label: str, with_plugin: list[float], without: list[float]) -> list[str]:
    plugin_s, bare_s = statistics.median(with_plugin), statistics.median(without)
    # The median of the per-pair ratios is less sensitive to a slow phase of the machine.
    pair_ratio = statistics.median(w / b for w, b in zip(with_plugin, without, strict=True))
    # The fastest run of each side is the one least disturbed by other work on the machine.
    fastest = min(with_plugin) / min(without)
    return [f"{label}: median {plugin_s:.3f} s with the plugin, {bare_s:.3f} s with -p no:sglang",
            f"  ratio of medians {plugin_s / bare_s:.3f}x, median of paired ratios {pair_ratio:.3f}x, "
            f"ratio of fastest runs {fastest:.3f}x (goal <= {GOAL:.2f}x)"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=15)
    parser.add_argument("--tests", type=int, default=100)
    parser.add_argument("--bytecode", choices=("on", "off", "env"), default="on")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-plugin-cost-") as tmp:
        root = Path(tmp) / "project"
        root.mkdir()
        make_project(root, options.tests)
        env = environment(options.bytecode, Path(tmp) / "pycache")
        with_plugin, without = measure(root, env, options.pairs)
    print(f"pytest --collect-only -q of {options.tests} trivial tests, {options.pairs} paired runs, "
          f"bytecode cache {options.bytecode}")
    for line in summary("wall", [w for w, _ in with_plugin], [w for w, _ in without]):
        print(line)
    if sys.platform != "win32":
        for line in summary("cpu ", [c for _, c in with_plugin], [c for _, c in without]):
            print(line)


if __name__ == "__main__":
    main()
