"""The extension module's stub (`_core.pyi`) declares exactly what the built module has.

`scripts/python-check.sh` type-checks a usage example against the installed stubs; that catches
a stub that is wrong about what it declares, but not one that misses a name the Rust side
added. These tests compare the installed `_core.pyi` with the loaded module, name by name.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import cutctx
from cutctx import _core

STUB = Path(_core.__file__).with_name("_core.pyi")

# Set on the class by `cutctx.types` for dataclass-style introspection; not part of the API.
INTROSPECTION_ONLY = {"CompactionPlan": {"transcript", "budget"}}


def stub_tree() -> ast.Module:
    return ast.parse(STUB.read_text(encoding="utf-8"), filename=str(STUB))


def stub_top_level() -> dict[str, ast.stmt]:
    names: dict[str, ast.stmt] = {}
    for node in stub_tree().body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            names[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
    return names


def stub_members(cls: ast.ClassDef) -> set[str]:
    members: set[str] = set()
    for node in cls.body:
        if isinstance(node, ast.FunctionDef):
            members.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            members.add(node.target.id)
    return {name for name in members if not name.startswith("_")}


def test_the_stub_is_installed_beside_the_extension_module() -> None:
    package = Path(cutctx.__file__).parent
    assert STUB.is_file()
    assert (package / "py.typed").is_file()


def test_the_stub_declares_every_name_of_the_module_and_no_other() -> None:
    runtime = {name for name in vars(_core) if not name.startswith("__")}
    assert set(stub_top_level()) == runtime


CLASSES = sorted(name for name, value in vars(_core).items() if inspect.isclass(value))


@pytest.mark.parametrize("name", CLASSES)
def test_each_class_declares_its_public_members_and_no_other(name: str) -> None:
    node = stub_top_level()[name]
    assert isinstance(node, ast.ClassDef)
    runtime = {
        member
        for member in vars(getattr(_core, name))
        if not member.startswith("_")
    } - INTROSPECTION_ONLY.get(name, set())
    assert stub_members(node) == runtime


def test_every_exported_class_of_the_core_is_in_the_stub() -> None:
    # `cutctx.types` re-exports the core's classes under the reference's names; each must be
    # declared under that same name, or `from cutctx import X` would not be typed.
    stubbed = set(stub_top_level())
    from_core = [
        name
        for name in cutctx.__all__
        if inspect.isclass(getattr(cutctx, name))
        and getattr(_core, getattr(cutctx, name).__name__, None) is getattr(cutctx, name)
    ]
    assert from_core, "no class of cutctx.__all__ comes from the core"
    assert set(from_core) <= stubbed
