"""No ``Any`` in the public signatures of the server and the fleet (issue 31), read from the source (ast).

A decoded JSON document is typed with :mod:`pytest_sglang.jsontypes` (or ``object`` and narrowing). Public:
a module-level function or a method of a public class whose name does not start with ``_`` (dunders count).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import pytest_sglang

_PACKAGE = Path(pytest_sglang.__file__).parent
#: The ``/server_info`` document a handle returns stays ``dict[str, Any]`` until its readers narrow it
#: (gates/production/speculative.py, gates/production/probes.py and gates/fleet/health.py read fields as
#: numbers and lists directly).
_SERVER_INFO = {("server/handle.py", "__init__"), ("server/handle.py", "info"), ("server/members.py", "info"),
                ("server/members.py", "initial_info"), ("fleet/handle.py", "info"), ("fleet/front.py", "initial_info")}


def _public(name: str) -> bool:
    return not name.startswith("_") or (name.startswith("__") and name.endswith("__"))


def _signatures(tree: ast.AST, public: bool = True) -> Iterator[tuple[int, str, ast.expr]]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and public and _public(node.name):
            a = node.args
            params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *(p for p in (a.vararg, a.kwarg) if p is not None)]
            for annotation in [p.annotation for p in params] + [node.returns]:
                if annotation is not None:
                    yield node.lineno, node.name, annotation
        elif isinstance(node, ast.ClassDef):
            yield from _signatures(node, public and _public(node.name))


def _any_in(annotation: ast.expr) -> bool:
    return any((isinstance(n, ast.Name) and n.id == "Any") or (isinstance(n, ast.Attribute) and n.attr == "Any")
               for n in ast.walk(annotation))


@pytest.mark.parametrize("folder", ["server", "fleet"])
def test_no_any_in_public_signatures(folder: str) -> None:
    found = []
    for path in sorted((_PACKAGE / folder).rglob("*.py")):
        for line, name, annotation in _signatures(ast.parse(path.read_text(encoding="utf-8"))):
            if _any_in(annotation) and not (
                    (path.relative_to(_PACKAGE).as_posix(), name) in _SERVER_INFO
                    and ast.unparse(annotation).startswith("dict[str, Any]")):
                found.append(f"{path.relative_to(_PACKAGE)}:{line} {name}: {ast.unparse(annotation)}")
    assert found == []
