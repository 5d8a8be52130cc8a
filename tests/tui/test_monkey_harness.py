"""The key monkey's own contract: a failure replays from the words it prints, and quitting an app
never leaves the monkey waiting for ever (a hang it reported would be its own, not the app's)."""

from __future__ import annotations

import asyncio
from typing import ClassVar

from monkey import Act, Monkey, acts, parse_acts, until_ended
from textual.app import App
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import Static
from tui_helpers import run_async


def test_the_printed_acts_parse_back_to_the_same_acts():
    stream = acts(7)
    sent = [next(stream) for _ in range(400)]
    replayable = [act for act in sent if act.kind in ("keys", "settle", "resize")]
    assert parse_acts(" ".join(str(act) for act in replayable)) == replayable
    assert parse_acts("ctrl+p+pageup shift+tab×3 resize:80x24+escape") == [
        Act("keys", keys=("ctrl+p", "pageup")),
        Act("keys", keys=("shift+tab",) * 3),
        Act("resize", size=(80, 24)),
        Act("keys", keys=("escape",)),
    ]


class LateScroll(Message):
    """A key a widget still handles when the app's loop has ended."""


class Scroller(VerticalScroll):
    async def on_late_scroll(self, message: LateScroll) -> None:
        await asyncio.shield(self.app._task)  # the app's loop ended and stopped its animator
        self.scroll_to(y=20, animate=True, immediate=True)


class ScrollsAsItLeaves(App):
    BINDINGS: ClassVar = [("q", "leave", "")]

    def compose(self):
        with Scroller():
            yield Static("line\n" * 200)

    def action_leave(self) -> None:
        self.query_one(Scroller).post_message(LateScroll())
        self.exit()


@run_async
async def test_quitting_does_not_wait_for_an_animation_the_ended_app_never_runs():
    # Pilot's press waits until the app's animations are complete; this one starts after the
    # animator stopped, so on the monkey before its own press the run hung until its watchdog.
    app = ScrollsAsItLeaves()
    async with app.run_test() as pilot:
        await pilot.pause()
        monkey = Monkey(app, pilot, seed=0)
        await asyncio.wait_for(monkey.quits(), timeout=60)
        await until_ended(app)
    assert app._animator._animations, "the scroll never started: the test no longer shows the hang"
    assert app.return_code in (0, None)
