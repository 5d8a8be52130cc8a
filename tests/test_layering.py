"""Data flows one way: core -> hooks -> recorder/trace -> TUI | JSON | replay. Nothing points back.

Read off the source with `ast`, so a lazy import inside a function counts as much as one at the
top of a module.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "gpt2viz"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every gpt2viz module `path` imports, as absolute names."""
    here = module_name(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("gpt2viz")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1])
                name = f"{base}.{node.module}" if node.module else base
            else:
                name = node.module or ""
            if name.startswith("gpt2viz"):
                found.add(name)
                found |= {f"{name}.{alias.name}" for alias in node.names}
    return found


@cache  # the source does not change during a run; parsing it all takes ~0.5 s (read only, not changed)
def graph() -> dict[str, set[str]]:
    return {module_name(p): imports_of(p) for p in PACKAGE.rglob("*.py")}


def importers_of(target: str) -> set[str]:
    return {mod for mod, deps in graph().items() if any(d == target or d.startswith(target + ".") for d in deps)}


def test_the_graph_is_read():
    """The checks below would pass vacuously on an empty graph."""
    g = graph()
    assert "gpt2viz.tui.app" in g and "gpt2viz.options" in g["gpt2viz.tui.app"]
    assert "gpt2viz.model.gpt2" in g["gpt2viz.language_model"]


def test_only_the_entry_points_import_the_cli():
    assert importers_of("gpt2viz.cli") <= {"gpt2viz.__main__", "gpt2viz.startup"}


def test_the_core_imports_nothing_above_it():
    """The model, the hooks, and what they use to speak: the errors and the translations."""
    above = ("gpt2viz.generate", "gpt2viz.language_model", "gpt2viz.trace", "gpt2viz.tui", "gpt2viz.cli", "gpt2viz.options")
    g = graph()
    core = [mod for mod in g if mod.startswith(("gpt2viz.model", "gpt2viz.i18n")) or mod in ("gpt2viz.hooks", "gpt2viz.errors")]
    assert {"gpt2viz.errors", "gpt2viz.i18n", "gpt2viz.i18n.catalog", "gpt2viz.hooks"} <= set(core)
    for mod in core:
        bad = sorted(d for d in g[mod] if d.startswith(above))
        assert not bad, f"{mod} imports {bad}"


def test_translations_import_nothing_of_gpt2viz_but_themselves():
    """gpt2viz.i18n is below everything, the errors and the core included."""
    for mod, deps in graph().items():
        if mod.startswith("gpt2viz.i18n"):
            bad = sorted(d for d in deps if not d.startswith("gpt2viz.i18n"))
            assert not bad, f"{mod} imports {bad}"


def test_traces_never_import_the_tui():
    for mod, deps in graph().items():
        if mod.startswith("gpt2viz.trace"):
            assert not [d for d in deps if d.startswith(("gpt2viz.tui", "gpt2viz.cli"))], mod
