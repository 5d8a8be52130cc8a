"""Pilot for this suite: key presses and pauses that end when the screen has settled, not when a
fixed sleep has passed.

Textual's Pilot ends every `press` and `pause` by waiting until the app's process is idle:
`textual._wait.wait_for_idle` sleeps in steps of `SLEEP_GRANULARITY` (1/50 s) until a step passes
with less than `SLEEP_IDLE` of CPU time used. A key press therefore costs at least 40 ms of sleep
however little the app does with it, and a TUI test that walks 60 stages sleeps 3 s of its 4
(measured on this project's 2-core machines, 60 presses of `right` on the step-through at
120 x 40; 1 s in 2 ms steps). Those 20 ms steps also hid a race: the screen's own refresh timer
usually fired inside them, so a test that read the screen right after a press mostly saw it
drawn, laid out again and its after-refresh callbacks run, but not always.

So here the idle wait steps 2 ms (the same ratio of CPU time for "idle"), and `press` and `pause`
go on pausing until the screen has nothing pending: no layout, scroll, repaint or recompose
asked for, no dirty widget, no callback waiting for the next refresh (Textual's own flags,
`Screen._on_timer_update` reads them), no resize waiting for the app's 1/120 s timer, and no
message waiting in the app's or a widget's queue. A test reads a screen that is done, on a quiet machine or
a busy one. Tests that need a model job to finish wait for that (`tui_helpers.started`,
`app.session.jobs.idle`), never for this.
"""

from __future__ import annotations

STEP = 0.002  # seconds
IDLE = STEP / 20  # CPU seconds in one step below which the process counts as idle (Textual's ratio)
PENDING = ("_layout_required", "_scroll_required", "_repaint_required", "_recompose_required", "_dirty_widgets", "_callbacks")
ROUNDS = 20  # pauses at most: an animation may keep a screen busy for good


def install() -> None:
    """Sets Textual's idle-wait step and wraps Pilot's press and pause. Fails loudly when a Textual
    upgrade renamed what it relies on."""
    import textual._wait as wait
    from textual.app import App
    from textual.pilot import Pilot
    from textual.screen import Screen

    if getattr(Pilot, "_settles", False):
        return
    for name in ("SLEEP_GRANULARITY", "SLEEP_IDLE"):
        assert isinstance(getattr(wait, name, None), float), f"textual._wait.{name} is gone: see tests/pilot_speed.py"
    screen = Screen()
    for name in (*PENDING, "_message_queue"):
        assert hasattr(screen, name), f"Screen.{name} is gone: see tests/pilot_speed.py"
    assert hasattr(App(), "_resize_event"), "App._resize_event is gone: see tests/pilot_speed.py"
    assert hasattr(App(), "_exception"), "App._exception is gone: see tests/pilot_speed.py"
    wait.SLEEP_GRANULARITY = STEP
    wait.SLEEP_IDLE = IDLE

    press, pause = Pilot.press, Pilot.pause

    def pending(app) -> bool:
        if app._exit or not app._screen_stack:
            return False
        if app._resize_event is not None:  # a resize waiting for its 1/120 s timer
            return True
        screen = app.screen
        return any(getattr(screen, name) for name in PENDING) or any(
            not node._message_queue.empty() for node in (app, *screen.walk_children(with_self=True))
        )

    async def settle(pilot: Pilot) -> None:
        for _ in range(ROUNDS):
            if not pending(pilot.app):
                return
            await pause(pilot)

    def alive(pilot: Pilot) -> None:
        """An app that raised is done: a press or pause on it waited up to 30 s each (Pilot's wait
        for the screen, which nothing answers any more), so a test polling a condition in a loop
        hung for hours instead of failing with the app's error."""
        error = pilot.app._exception
        if error is not None:
            raise AssertionError(f"the app raised {error!r}") from error

    async def settling_press(self: Pilot, *keys: str) -> None:
        alive(self)
        await press(self, *keys)
        if keys:
            await settle(self)

    async def settling_pause(self: Pilot, delay: float | None = None) -> None:
        alive(self)
        await pause(self, delay)
        await settle(self)

    Pilot.press = settling_press
    Pilot.pause = settling_pause
    Pilot._settles = True
