"""Assemble README.md from docs/ (run after editing a doc; tests/test_readme.py keeps it current).

    python scripts/build_readme.py          # write README.md
    python scripts/build_readme.py --check  # exit 1 if README.md is out of date
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PARTS = ["plugin", "capacity", "loadgen", "reports", "docker", "simulator", "server", "real-sglang", "limitations"]


def demote(text: str) -> str:
    """Shift headings one level down (outside fenced code, where '#' is a shell comment)."""
    out, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and line.startswith("#"):
            line = "#" + line
        out.append(line)
    return "\n".join(out).rstrip() + "\n"


def render() -> str:
    docs = ROOT / "docs"
    sections = [(docs / "intro.md").read_text().rstrip() + "\n"]
    sections += [demote((docs / f"{name}.md").read_text()) for name in PARTS]
    return "\n".join(sections)


def main(argv: list[str]) -> int:
    text = render()
    readme = ROOT / "README.md"
    if "--check" in argv:
        if readme.read_text() != text:
            print("README.md is out of date: run python scripts/build_readme.py", file=sys.stderr)
            return 1
        return 0
    readme.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
