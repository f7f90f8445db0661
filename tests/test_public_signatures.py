"""Issue 31: no public signature typed bare ``Any`` (a parameter, ``**kwargs`` or a return).

A decoded JSON document is :mod:`pytest_sglang.jsontypes`; anything else gets its precise type or
``object`` and is narrowed where it is read. Folders join the list as they are cleaned.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pytest_sglang

PACKAGE = Path(pytest_sglang.__file__).parent
CLEAN = ["accuracy", "acceptance", "cli", "correctness", "plugin", "report/text.py"]


def _any(node: ast.expr | None) -> bool:
    return (isinstance(node, ast.Name) and node.id == "Any") or (isinstance(node, ast.Attribute)
                                                                  and node.attr == "Any")


def _public(name: str) -> bool:
    return not name.startswith("_") or (name.startswith("__") and name.endswith("__"))


def bare_any(tree: ast.AST, where: str) -> list[str]:
    """``file:line name(param)`` for each public parameter or return annotated bare ``Any``."""
    found: list[str] = []

    def walk(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef) and _public(child.name):
                walk(child)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) and _public(child.name):
                a = child.args
                params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, (a.vararg, a.kwarg))]
                found.extend(f"{where}:{child.lineno} {child.name}({p.arg})" for p in params if _any(p.annotation))
                if _any(child.returns):
                    found.append(f"{where}:{child.lineno} {child.name} -> Any")

    walk(tree)
    return found


@pytest.mark.parametrize("folder", CLEAN)
def test_no_bare_any_in_public_signatures(folder: str) -> None:
    root = PACKAGE / folder
    files = sorted(root.rglob("*.py")) if root.is_dir() else [root]
    found = [hit for path in files for hit in bare_any(ast.parse(path.read_text()), str(path.relative_to(PACKAGE)))]
    assert found == []


def test_the_scan_sees_kwargs_params_and_returns() -> None:
    tree = ast.parse("def f(a: Any, **kw: Any) -> Any: ...\ndef _g(a: Any): ...\n"
                     "class C:\n    def m(self, x: Any): ...")
    assert bare_any(tree, "m.py") == ["m.py:1 f(a)", "m.py:1 f(kw)", "m.py:1 f -> Any", "m.py:4 m(x)"]
