"""docs/api.md and the code agree: every documented name exists and is in its module's
`__all__`, every name in those `__all__` is documented, and each carries a docstring and type
hints (the package ships py.typed)."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
API = (REPO / "docs" / "api.md").read_text(encoding="utf-8")


def documented() -> dict[str, list[str]]:
    """Module -> the names its section lists (`- `name(...)`: ...` bullets)."""
    sections, current = {}, None
    for line in API.splitlines():
        heading = re.match(r"^## (gpt2viz(\.\w+)*)\s*$", line)
        if heading:
            current = sections.setdefault(heading.group(1), [])
        elif current is not None and (item := re.match(r"^- `(\w+)", line)):
            current.append(item.group(1))
    return sections


SECTIONS = documented()


def test_the_page_has_a_section_per_public_module():
    assert set(SECTIONS) == {"gpt2viz", "gpt2viz.hooks", "gpt2viz.activation_cache", "gpt2viz.interventions",
                             "gpt2viz.attribution", "gpt2viz.patching", "gpt2viz.head_detector", "gpt2viz.errors"}
    assert (REPO / "gpt2viz" / "py.typed").is_file()


@pytest.mark.parametrize("module_name", sorted(SECTIONS))
def test_documented_names_are_the_modules_all(module_name):
    module = importlib.import_module(module_name)
    names = SECTIONS[module_name]
    assert sorted(names) == sorted(module.__all__)
    for name in names:
        assert getattr(module, name) is not None


def _public_callables(obj):
    if inspect.isclass(obj):
        for name, member in vars(obj).items():
            if name.startswith("_"):
                continue
            if isinstance(member, property):
                yield f"{obj.__name__}.{name}", member.fget
            elif inspect.isfunction(member) or isinstance(member, (classmethod, staticmethod)):
                yield f"{obj.__name__}.{name}", getattr(member, "__func__", member)
    elif inspect.isfunction(obj):
        yield obj.__name__, obj


@pytest.mark.parametrize("module_name", sorted(SECTIONS))
def test_every_public_name_has_a_docstring_and_type_hints(module_name):
    module = importlib.import_module(module_name)
    problems = []
    for name in module.__all__:
        obj = getattr(module, name)
        if inspect.isclass(obj) and not obj.__doc__:
            problems.append(f"{name}: no docstring")
        for where, fn in _public_callables(obj):
            if not inspect.getdoc(fn):
                problems.append(f"{where}: no docstring")
            sig = inspect.signature(fn)
            untyped = [p for p in sig.parameters.values()
                       if p.name not in ("self", "cls") and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
                       and p.annotation is inspect.Parameter.empty]
            if untyped or sig.return_annotation is inspect.Signature.empty:
                problems.append(f"{where}: untyped {[p.name for p in untyped] or 'return'}")
    assert problems == []
