"""Reading what the app shows, for the TUI tests."""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path

TINY_TRACE = Path(__file__).resolve().parents[1] / "data" / "tiny-trace.json"
GENERATION_TRACE = TINY_TRACE.with_name("tiny-generation-trace.json")


def run_async(test):
    """Runs an `async def` test with asyncio (no pytest async plugin needed); fixtures still work."""

    @functools.wraps(test)
    def run(*args, **kwargs):
        return asyncio.run(test(*args, **kwargs))

    return run


def screen_text(app) -> str:
    """The characters on the app's screen right now, line by line."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def stage_text(app) -> str:
    """Everything the stage view holds (also what is scrolled out of sight)."""
    from textual.widgets import Static

    from gpt2viz.tui.widgets.laid import Laid
    from gpt2viz.tui.widgets.stage_view import StageCount, StageView
    from gpt2viz.tui.widgets.strip_widget import Prose, StripWidget

    view = app.screen.query_one(StageView)
    parts = []
    for widget in view.query("*"):
        if not all(node.display for node in widget.ancestors_with_self if node is not view):
            continue
        if isinstance(widget, Laid):  # as laid out for the width it has
            parts.append(widget.plain)
        elif isinstance(widget, StageCount):
            parts.append(widget.render().plain)
        elif isinstance(widget, Static):
            content = widget.content
            parts.append(getattr(content, "plain", str(content)))
        elif isinstance(widget, Prose):  # the paragraphs as written, not as wrapped
            parts.append(widget.text)
        elif isinstance(widget, StripWidget):
            parts.extend(strip.text for strip in widget.lines(max(widget.size.width, 80)))
    return "\n".join(parts)


def panel_text(screen, selector: str) -> str:
    """Everything a panel of the generation view holds (also what is scrolled out of sight)."""
    from textual.widgets import Static

    from gpt2viz.tui.widgets.laid import Laid
    from gpt2viz.tui.widgets.strip_widget import Prose, StripWidget

    panel = screen.query_one(selector)
    parts = []
    for widget in panel.query("*"):
        if isinstance(widget, Laid):  # as laid out for the width it has
            parts.append(widget.plain)
        elif isinstance(widget, Static):
            content = widget.content
            parts.append(getattr(content, "plain", str(content)))
        elif isinstance(widget, Prose):  # the paragraphs as written, not as wrapped
            parts.append(widget.text)
        elif isinstance(widget, StripWidget):
            parts.extend(strip.text for strip in widget.lines(max(widget.size.width, 36)))
    return "\n".join(parts)


def stages_in_blocks(stages, blocks) -> list[int]:
    """Indices of the stages outside the blocks and of those in `blocks` (None: every stage): a walk
    that leaves out the middle blocks, which say the same sentences and draw the same pictures with
    other numbers."""
    return [i for i, stage in enumerate(stages) if blocks is None or stage.layer is None or stage.layer in blocks]


async def started(app, pilot, screen=None) -> None:
    """Until the app shows `screen` (the step-through by default) with no model work left, drawn."""
    import asyncio

    from gpt2viz.tui.screens.step import StepScreen

    screen = screen or StepScreen
    for _ in range(600):
        await pilot.pause()
        if isinstance(app.screen, screen) and app.session.jobs.idle:
            await pilot.pause()
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"still on {type(app.screen).__name__}")
