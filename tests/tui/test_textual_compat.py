"""Textual's private parts that gpt2viz overrides are still the code the overrides were written for,
and they live in one module only."""

from __future__ import annotations

import ast
from pathlib import Path

import textual

from gpt2viz.tui import textual_compat

TUI = Path(textual_compat.__file__).parent


def test_every_private_part_of_textual_is_the_code_the_overrides_were_written_for():
    changed = textual_compat.changed_parts()
    assert not changed, (
        f"Textual {textual.__version__} changed {', '.join(changed)}: look at gpt2viz/tui/textual_compat.py's "
        "overrides of them again, then record the new fingerprints in TEXTUAL_PRIVATE"
    )


def test_a_changed_part_is_found():
    """The check above would pass vacuously if a fingerprint could not tell code apart."""
    owner, name = next(iter(textual_compat.TEXTUAL_PRIVATE))
    saved = textual_compat.TEXTUAL_PRIVATE[owner, name]
    try:
        textual_compat.TEXTUAL_PRIVATE[owner, name] = "0" * 16
        assert textual_compat.changed_parts() == [f"{owner.__qualname__}.{name}"]
    finally:
        textual_compat.TEXTUAL_PRIVATE[owner, name] = saved


# Private names of Textual that gpt2viz's code may not use outside textual_compat.py (but those
# too common to tell apart from gpt2viz's own: __init__, _run, parse).
PRIVATE = {name for _owner, name in textual_compat.TEXTUAL_PRIVATE} - {"__init__", "_run", "parse"} | {
    "_compositor", "_driver", "_exception", "_bindings", "_close_messages_no_wait", "_NO_MATCHES", "_list_visible",
}


def test_no_other_module_of_the_app_touches_textuals_private_parts():
    found = []
    for path in TUI.rglob("*.py"):
        if path.name == "textual_compat.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in PRIVATE:
                found.append(f"{path.relative_to(TUI)}:{node.lineno} .{node.attr}")
            if isinstance(node, ast.FunctionDef) and node.name in PRIVATE:
                found.append(f"{path.relative_to(TUI)}:{node.lineno} def {node.name}")
    assert not found, found


def test_a_strip_makes_the_caches_textual_gives_it_on_first_use_and_keeps_them():
    from rich.segment import Segment
    from textual.cache import FIFOCache
    from textual.strip import Strip

    # The caches Textual's own __init__ makes, by name and size, are the ones made lazily.
    original = object.__new__(Strip)
    textual_compat._REPLACED[Strip, "__init__"](original, [Segment("ab")])
    made = {}
    for name in Strip.__slots__:
        value = Strip.__dict__[name].fget(original) if isinstance(Strip.__dict__[name], property) else None
        if isinstance(value, FIFOCache):
            made[name] = value._maxsize
    assert made == textual_compat._STRIP_CACHES
    strip = Strip([Segment("hello "), Segment("world")])
    assert strip.crop(0, 7) is strip.crop(0, 7)  # the crop cache holds what it made
    assert strip.crop(0, 7).text == "hello w" and strip.cell_length == 11
    assert len(strip._crop_cache) == 1


def test_call_when_drawn_waits_for_the_paint_that_a_layout_asks_for():
    """A layout posts Resize messages, and a handler of one may ask for more drawing: here a panel
    that grew with its text says its new height in its border, as the generation view's panels say
    "more" (measured there: a second paint 18-33 ms after the first). `call_when_drawn` calls back only
    once that is on the screen too; Textual's `call_after_refresh` calls back before it, and timed
    work started then would share the CPU with the paint."""
    import asyncio

    from textual.containers import Vertical
    from textual.widgets import Static

    class Panel(Vertical):
        painted = ""  # the border subtitle as last painted

        def on_resize(self) -> None:
            self.border_subtitle = f"{self.size.height} lines"

        def render_lines(self, crop):
            Panel.painted = str(self.border_subtitle)
            return super().render_lines(crop)

    class Demo(textual_compat.CompatApp):
        CSS = "Panel { border: round white; height: auto; }"

        def compose(self):
            with Panel():
                yield Static("0")

    async def run() -> dict[str, tuple[str, str]]:
        app = Demo()
        seen: dict[str, tuple[str, str]] = {}
        async with app.run_test(size=(40, 12)) as pilot:
            await pilot.pause()
            for lines, how in ((5, "call_after_refresh"), (8, "call_when_drawn")):
                app.query_one(Static).update("\n".join(str(n) for n in range(lines)))
                getattr(app, how)(lambda how=how, lines=lines: seen.setdefault(how, (Panel.painted, f"{lines} lines")))
                for _ in range(200):
                    await asyncio.sleep(0.005)
                    if how in seen and Panel.painted == f"{lines} lines":
                        break
        return seen

    seen = asyncio.run(run())
    painted, grown = seen["call_when_drawn"]
    assert painted == grown, "called back before the panel's new height was painted"
    painted, grown = seen["call_after_refresh"]
    assert painted != grown, "Textual's own callback came after the second paint: this test shows nothing"


def test_a_number_stays_with_its_unit_at_a_line_break():
    from rich.console import Console
    from rich.text import Text
    from textual.content import Content

    sentence = "The cache holds 6.1 KiB (360 KiB in all), read at 47.6 GB/s in 18.5 ms/token, 2 tokens."
    for width in range(12, 40):
        lines = [line.plain.strip() for line in Content(sentence).wrap(width)]
        assert "".join(lines).replace(" ", "") == sentence.replace(" ", "")
        for unit in ("KiB", "KiB", "GB/s", "ms/token"):
            assert not any(line.startswith(unit) for line in lines), (width, lines)
        rich_lines = Text(sentence).wrap(Console(width=width), width)
        assert not any(line.plain.startswith(("KiB", "GB/s", "ms/token")) for line in rich_lines)
    # A unit only where one is: "2 tokens" and "x 3" still break as words do.
    assert [line.plain.strip() for line in Content("aaaa 2 tokens").wrap(6)] == ["aaaa 2", "tokens"]
    # A word longer than the line is still folded, its unit with it.
    assert [line.plain.strip() for line in Content("12345 KiB").wrap(5)] == ["12345", "KiB"]
