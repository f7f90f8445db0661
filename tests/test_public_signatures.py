"""Issue 31, over the whole package, read from the source (ast): what the house promises of every module.

- No public signature is typed bare ``Any`` (a parameter, ``*args``/``**kwargs`` or a return). A decoded JSON
  document is :mod:`pytest_sglang.jsontypes`; anything else gets its precise type, or ``object`` narrowed
  where it is read. Public: a function or a method of a public class whose name does not start with ``_``
  (dunders count).
- The server and the fleet (the handle's own layer) carry no ``Any`` nested either, but for the
  ``/server_info`` document, which stays ``dict[str, Any]`` until the gates that read it narrow it.
- A module stays near 300 lines, or says why near its top (``Over 300 lines: ...``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import pytest_sglang

PACKAGE = Path(pytest_sglang.__file__).parent
MODULES = sorted(PACKAGE.rglob("*.py"))
#: Folders whose signatures carry no ``Any`` even nested (``dict[str, Any]``).
STRICT = ("server", "fleet")
#: The ``/server_info`` document a handle returns: gates/production/speculative.py, gates/production/probes.py
#: and gates/fleet/health.py read its fields as numbers and lists directly.
SERVER_INFO = {("server/handle.py", "__init__"), ("server/handle.py", "info"), ("server/members.py", "info"),
               ("server/members.py", "initial_info"), ("fleet/handle.py", "info"), ("fleet/front.py", "initial_info")}
#: Near 300 lines: what a module may reach before it says why it is longer.
NEAR = 320


def _public(name: str) -> bool:
    return not name.startswith("_") or (name.startswith("__") and name.endswith("__"))


def signatures(tree: ast.AST) -> Iterator[tuple[int, str, ast.expr]]:
    """``(line, name, annotation)`` of each parameter and return of each public function and method."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.ClassDef) and _public(node.name):
            yield from signatures(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _public(node.name):
            a = node.args
            params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, (a.vararg, a.kwarg))]
            for annotation in [p.annotation for p in params] + [node.returns]:
                if annotation is not None:
                    yield node.lineno, node.name, annotation


def _is_any(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == "Any") or (isinstance(node, ast.Attribute) and node.attr == "Any")


def _where(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


def bare_any(tree: ast.AST, where: str) -> list[str]:
    return [f"{where}:{line} {name}: {ast.unparse(a)}" for line, name, a in signatures(tree) if _is_any(a)]


@pytest.mark.parametrize("path", MODULES, ids=_where)
def test_no_public_signature_is_typed_bare_any(path: Path) -> None:
    assert bare_any(ast.parse(path.read_text(encoding="utf-8")), _where(path)) == []


@pytest.mark.parametrize("folder", STRICT)
def test_the_handles_layers_carry_no_nested_any(folder: str) -> None:
    found = []
    for path in sorted((PACKAGE / folder).rglob("*.py")):
        for line, name, annotation in signatures(ast.parse(path.read_text(encoding="utf-8"))):
            text = ast.unparse(annotation)
            if any(_is_any(n) for n in ast.walk(annotation)) and not (
                    (_where(path), name) in SERVER_INFO and text.startswith("dict[str, Any]")):
                found.append(f"{_where(path)}:{line} {name}: {text}")
    assert found == []


def test_the_scan_sees_kwargs_params_returns_and_methods() -> None:
    tree = ast.parse("def f(a: Any, **kw: Any) -> Any: ...\ndef _g(a: Any): ...\n"
                     "class C:\n    def m(self, x: typing.Any): ...\nclass _D:\n    def m(self, x: Any): ...")
    assert bare_any(tree, "m.py") == ["m.py:1 f: Any", "m.py:1 f: Any", "m.py:1 f: Any", "m.py:4 m: typing.Any"]


@pytest.mark.parametrize("path", MODULES, ids=_where)
def test_a_module_stays_near_300_lines_or_says_why(path: Path) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    if len(lines) > NEAR:
        assert any(re.search(r"\d{3} lines", line) for line in lines[:20]), (
            f"{_where(path)}: {len(lines)} lines, and no line near its top says why (e.g. '# Over 300 lines: ...')")
