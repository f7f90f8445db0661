"""Record the launch flags of an installed SGLang gateway (smg 1.x, sglang-router 0.3.x) as a package table.

    python scripts/gateway/record_flags.py                       # smg from this interpreter's environment
    python scripts/gateway/record_flags.py --python "$SGLANG_ROUTER_PYTHON" --flavor sglang-router
    python scripts/gateway/record_flags.py --check ...           # exit 1 if the shipped table differs

Both gateways parse their flags with argparse. The gateway's own entry point (``smg launch --help``,
``python -m sglang_router.launch_router --help``) is run in the gateway's interpreter with the parser's
``print_help`` replaced by a dump of its actions, so the table is exactly the parser the gateway uses,
not a reading of its help text. The table has the format of ``pytest_sglang/data/sglang_0_5_23_flags.txt``
(option strings, dest, arity, value type, choices) and is written to
``pytest_sglang/data/<flavor>_<version>_flags.txt``. Defaults are not recorded: smg reads some from the
environment (``ATP_PASSWORD``, ``REDIS_URL``), which would put a machine's secrets into the table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "pytest_sglang" / "data"

#: Runs in the gateway's interpreter: prints the router parser's actions as JSON, then the version.
_CAPTURE = r"""
import argparse, importlib.metadata as md, json, sys
flavor = sys.argv[1]
def dump(self, file=None):
    rows = []
    for a in self._actions:
        if isinstance(a, argparse._HelpAction):
            continue
        kind = type(a).__name__
        rows.append({"options": list(a.option_strings), "dest": a.dest, "nargs": a.nargs, "kind": kind,
                     "type": getattr(a.type, "__name__", None) if a.type is not None else None,
                     "choices": [str(c) for c in a.choices] if a.choices else []})
    dist = "smg" if flavor == "smg" else "sglang-router"
    print(json.dumps({"version": md.version(dist), "flags": rows}))
    sys.exit(0)
argparse.ArgumentParser.print_help = dump
if flavor == "smg":
    from smg.cli import main
    main(["launch", "--help"])
else:
    from sglang_router.launch_router import main
    sys.argv = ["launch_router", "--help"]
    main()
"""
_ZERO = {"_StoreTrueAction", "_StoreFalseAction", "_StoreConstAction", "_CountAction", "_AppendConstAction"}


def capture(python: str, flavor: str) -> dict[str, object]:
    done = subprocess.run([python, "-c", _CAPTURE, flavor], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, check=False)
    if done.returncode != 0 or not done.stdout.strip():
        sys.exit(f"could not read {flavor}'s parser with {python}:\n{done.stderr[-2000:]}")
    data: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return data


def _arity(row: dict[str, object]) -> str:
    if row["kind"] == "BooleanOptionalAction":
        return "bool"
    if row["kind"] in _ZERO or row["nargs"] == 0:
        return "0"
    nargs = row["nargs"]
    if nargs in (None, 1):
        return "1"
    if nargs in ("?", "*", "+"):
        return str(nargs)
    raise SystemExit(f"unsupported nargs {nargs!r} of {row['options']}")


def table(flavor: str, data: dict[str, object]) -> str:
    """The table text for ``data`` (from :func:`capture`)."""
    rows = data["flags"]
    assert isinstance(rows, list)
    lines = [f"# Every option of {flavor} {data['version']}'s launch parser "
             f"({'smg launch' if flavor == 'smg' else 'python -m sglang_router.launch_router'}),",
             "# recorded from the installed gateway by scripts/gateway/record_flags.py. One option per line,",
             "# tab-separated: option strings (space-separated), dest, arity, value type, choices (comma-separated).",
             "# arity: 0 = bare flag, 1 = one value, ? + * = argparse nargs, bool = --x/--no-x pair.",
             "# type: int, float, str (the gateway's own converters, e.g. lower(), are recorded as str)."]
    for row in rows:
        numeric = row["type"] if row["type"] in ("int", "float") else "str"
        value_type = "-" if _arity(row) in ("0", "bool") else numeric
        fields = [" ".join(row["options"]), str(row["dest"]), _arity(row), str(value_type)]
        if row["choices"] and row["type"] in (None, "str", "int", "float"):  # lower() etc. normalise first
            fields.append(",".join(sorted(row["choices"])))  # some are sets: their order changes per run
        lines.append("\t".join(fields))
    return "\n".join(lines) + "\n"


def path_for(flavor: str, version: str) -> Path:
    return DATA / f"{flavor.replace('-', '_')}_{version.replace('.', '_')}_flags.txt"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=sys.executable, help="the gateway's interpreter")
    parser.add_argument("--flavor", choices=("smg", "sglang-router"), default="smg")
    parser.add_argument("--check", action="store_true", help="compare with the shipped table instead of writing")
    args = parser.parse_args()
    data = capture(args.python, args.flavor)
    text = table(args.flavor, data)
    path = path_for(args.flavor, str(data["version"]))
    if args.check:
        same = path.is_file() and path.read_text("utf-8") == text
        print(f"{path.name}: {'matches' if same else 'DIFFERS from'} the installed {args.flavor} {data['version']}")
        sys.exit(0 if same else 1)
    path.write_text(text, "utf-8")
    print(f"wrote {path} ({len(text.splitlines()) - 5} flags)")


if __name__ == "__main__":
    main()
