"""A seeded key monkey for the TUI: random keys, held keys, bursts, pastes and resizes.

`acts(seed)` is the same endless stream of acts for the same seed, so a failure replays exactly:
the driver (`drive`) sends them to an app under Textual's Pilot, in-process, and fails on any
exception, any line in errors.log, a screen stack without the app's screens, or an app that ended
with an error; its message names the seed and the last 50 acts. `tools/key_mash.py` sends the same
stream to the real app in tmux.

Acts: one key; a key held (the same key 5-30 times with no pause, as a terminal repeats it); a
burst (2-8 keys with no pause); a paste (ASCII, Chinese, control characters); a resize (below the
minimum size too); a settle (wait until the app has handled everything, as a person pausing). The
monkey never presses a quit key except where it types into a text field; quitting is checked at
the end of a run (`quits`).
"""

from __future__ import annotations

import asyncio
import random
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from textual import events
from textual.drivers.headless_driver import HeadlessDriver
from textual.geometry import Size
from textual.keys import _character_to_key
from textual.widgets import Input

# Every key some screen binds, and the keys people hold or mash. The keys that open a screen are
# drawn less often than the others: opening and closing one takes Textual ~100 times longer than a
# step, and each run starts on its screen anyway (OPENERS).
KEYS = (
    "left", "right", "up", "down", "pageup", "pagedown", "home", "end", "enter", "escape", "tab", "shift+tab",
    "space", "backspace", "delete",
    "h", "l", "j", "k", "left_square_bracket", "right_square_bracket", "comma", "full_stop", "a",
    "u", "U", "L", "b", "r", "n", "t", "1", "2", "3",
)
OPENING = ("o", "e", "g", "m", "w", "x", "question_mark", "s", "c", "ctrl+p", "i")
# Keys people hold down: they repeat about 30 times a second.
HELD = ("right", "left", "down", "up", "pagedown", "pageup", "l", "h", "right_square_bracket", "full_stop", "space",
        "escape", "enter", "tab")
TYPING = "abcdefghijklmnopqrstuvwxyz0123456789 .,:-q"
PASTES = (
    "The capital of France is",
    "ROMEO: But soft, what light through yonder window breaks?",
    "猫坐在垫子上。人工智能",
    "a\x1b[31mred\x1b]0;title\x07\x00\u202eevil\u200b!",
    "\t\r\n\x7f\x85",
    "x" * 300,
)
SIZES = ((120, 40), (80, 24), (40, 12), (100, 30), (150, 45), (79, 23))
QUIT_KEYS = ("q", "ctrl+c", "ctrl+q")

KEY_CHARACTERS = {
    "space": " ", "left_square_bracket": "[", "right_square_bracket": "]", "comma": ",", "full_stop": ".",
    "question_mark": "?", "tab": "\t", "enter": "\r", "escape": "\x1b", "backspace": "\x7f",
}


@dataclass(frozen=True)
class Act:
    """One thing the monkey does."""

    kind: str  # "keys", "type", "paste", "resize" or "settle"
    keys: tuple[str, ...] = ()
    text: str = ""
    size: tuple[int, int] = (0, 0)

    def __str__(self) -> str:
        if self.kind == "keys":
            if len(self.keys) > 2 and len(set(self.keys)) == 1:
                return f"{self.keys[0]}×{len(self.keys)}"
            return "+".join(self.keys)
        if self.kind == "type":
            return f"type {self.text!r}"
        if self.kind == "paste":
            return f"paste {self.text[:20]!r}"
        if self.kind == "resize":
            return f"resize:{self.size[0]}x{self.size[1]}"
        return "settle"

    @property
    def key_count(self) -> int:
        return len(self.keys) or len(self.text) or 0


def acts(seed: int) -> Iterator[Act]:
    """The endless stream of acts of `seed` (keys, held keys, bursts, typing, pastes, resizes)."""
    rng = random.Random(seed)
    while True:
        r = rng.random()
        if r < 0.008:
            yield Act("resize", size=rng.choice(SIZES))
        elif r < 0.016:
            yield Act("paste", text=rng.choice(PASTES))
        elif r < 0.05:
            yield Act("type", text="".join(rng.choice(TYPING) for _ in range(rng.randint(1, 6))))
        elif r < 0.10:
            yield Act("settle")
        elif r < 0.20:
            yield Act("keys", keys=(rng.choice(HELD),) * rng.randint(5, 30))
        elif r < 0.30:
            yield Act("keys", keys=tuple(rng.choice(KEYS + OPENING[:3]) for _ in range(rng.randint(2, 8))))
        elif r < 0.36:
            yield Act("keys", keys=(rng.choice(OPENING),))
        else:
            yield Act("keys", keys=(rng.choice(KEYS),))


class MonkeyFailure(AssertionError):
    """The app broke; the message says how, with the seed and the last acts to replay it."""


def key_event(key: str) -> events.Key:
    """The event a terminal sends for `key` (a key name, or one character typed)."""
    if len(key) == 1 and not key.isalnum():
        return events.Key(_character_to_key(key), key)
    char = KEY_CHARACTERS.get(key, key if len(key) == 1 else None)
    return events.Key(key, char)


class Monkey:
    """Sends acts to one app under Pilot and checks it after each."""

    def __init__(
        self, app, pilot, seed: int, errors_log: Path | None = None, label: str = "", quit_keys: bool = False
    ) -> None:
        self.app, self.pilot, self.seed = app, pilot, seed
        self.quit_keys = quit_keys  # whether q and ctrl+c are sent outside a text field too
        self.errors_log = errors_log
        self.label = label
        self.history: deque[Act] = deque(maxlen=50)
        self.keys = 0

    def failure(self, what: str) -> MonkeyFailure:
        last = " ".join(str(act) for act in self.history)
        return MonkeyFailure(f"{what}\n  run: {self.label} seed={self.seed} after {self.keys} keys\n  last acts: {last}")

    def check(self) -> None:
        app = self.app
        if app._exception is not None:
            raise self.failure(f"exception: {app._exception!r}") from app._exception
        if getattr(app, "error", None):
            raise self.failure(f"the app's crash line: {app.error}")
        if self.errors_log is not None and self.errors_log.exists() and self.errors_log.stat().st_size:
            raise self.failure(f"errors.log: {self.errors_log.read_text()[-3000:]}")
        if not app._exit and len(app.screen_stack) < 2:
            raise self.failure(f"screen stack without the app's screens: {app.screen_stack}")

    @property
    def ended(self) -> bool:
        """Whether the app left (the palette's Quit, say): the run goes on in a new app."""
        return bool(self.app._exit)

    async def send(self, act: Act) -> None:
        app, pilot = self.app, self.pilot
        self.history.append(act)
        if act.kind == "resize":  # as a terminal's SIGWINCH: the app is not waited for
            size = Size(*act.size)
            if isinstance(app._driver, HeadlessDriver):
                app._driver._size = size
            app.post_message(events.Resize(size, size))
        elif act.kind == "settle":
            await pilot.pause()
        elif act.kind == "paste":
            app.post_message(events.Paste(act.text))
            self.keys += 1
        else:
            keys = act.keys if act.kind == "keys" else tuple(act.text)
            for key in keys:
                if key in QUIT_KEYS and not self.quit_keys and not isinstance(app.focused, Input):
                    continue  # quitting is checked at the end of a run
                app.post_message(key_event(key))
            self.keys += len(keys)
        await asyncio.sleep(0)

    async def run(self, stream: Iterator[Act], keys: int) -> None:
        """Sends acts from `stream` until `keys` keys were sent or the app left; checks after each."""
        while self.keys < keys and not self.ended:
            await self.send(next(stream))
            self.check()
        if not self.ended:
            await self.pilot.pause()
            self.check()

    async def press(self, key: str) -> None:
        """Pilot's press, except that nothing is waited for once the app's loop has ended.

        Pilot waits after each key until the app's animations are complete. A widget still handling
        a key sent before q may start one (an immediate scroll) after the ended loop stopped the
        app's animator: that animation never runs, so Pilot would wait for ever, where a terminal
        app just ends (the monkey soaks' rare hangs)."""
        press = asyncio.ensure_future(self.pilot.press(key))
        await asyncio.wait([press, self.app._task], return_when=asyncio.FIRST_COMPLETED)
        if not press.done():
            press.cancel()
            await asyncio.gather(press, return_exceptions=True)

    async def quits(self) -> None:
        """Leaves every text field (escape), then q; else ctrl+c: the app must end, exit status 0
        (130 where ctrl+c came while the loading screen was up: an interruption)."""
        app = self.app
        for _ in range(3):
            if not isinstance(app.focused, Input):
                break
            await self.press("escape")
        if not app._exit:
            await self.press("q")
        if not app._exit:
            await self.press("ctrl+c")
        self.check()
        if not app._exit:
            raise self.failure(f"q and ctrl+c did not quit (on {type(app.screen).__name__})")
        if app.return_code not in (0, 130, None) or (app.return_code == 130 and app.farewell is None):
            raise self.failure(f"exit status {app.return_code} after quitting")


# Where each run starts: the keys that open the screen it is about (None: the loading screen, the
# app started on a checkpoint to load).
OPENERS: dict[str, tuple[str, ...] | None] = {
    "step-through": (),
    "map": ("o",),
    "what-if": ("right_square_bracket", "x"),
    "attribution": ("w",),
    "cost-lab": ("m",),
    "generation": ("g",),
    "settings": ("g", "s"),
    "compare": ("g", "c"),
    "help": ("question_mark",),
    "palette": ("ctrl+p",),
    "prompt-editor": ("e",),
    "loading": None,
    # A lesson started from the palette: its panel, the guess field and n over the step-through.
    "lesson": ("ctrl+p", *"lesson 003", "enter"),
    # The lesson menu (i): lessons started, closed and chosen again over every screen.
    "lesson-menu": ("i",),
}


async def wait_for_idle_model() -> None:
    """Until no app's model thread is running a job (an app that quit leaves its job to end at its
    next step; two apps' jobs on one shared model would record each other's hooks)."""
    from gpt2viz.tui.jobs import busy

    for _ in range(3000):
        if not busy():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("a model job of an app that quit is still running after 30 s")


async def until_ended(app) -> None:
    """Until an app that exited has handled what was queued before its exit took effect (keys typed
    after q reach it, as in a terminal). Leaving Pilot's `run_test` at once would prune its screens
    while its loop still handles those keys (ScreenStackError in Textual's `_check_bindings`), which
    in a terminal cannot happen: Textual shuts an app down after its loop ended."""
    await asyncio.wait_for(asyncio.shield(app._task), timeout=30)


# A run that has not ended after this long hangs: it fails, with what every task was waiting on.
HANG_S = 600


def await_chain(task: asyncio.Task) -> list[str]:
    """'file:line in function' for each coroutine `task` is awaiting through, outermost first
    (asyncio's own stacks show only the outermost), and what the innermost waits on."""
    lines: list[str] = []
    coro = task.get_coro()
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None:
            lines.append(f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}")
        awaited = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
        if awaited is None or not (hasattr(awaited, "cr_frame") or hasattr(awaited, "gi_frame")):
            if awaited is not None:
                lines.append(f"waiting on {awaited!r}"[:300])
            break
        coro = awaited
    return lines


def task_stacks() -> str:
    """Where the asyncio tasks of this loop are waiting, for a hang: every task but the timers and
    the widgets' message pumps waiting for their next message (those are counted)."""
    out: list[str] = []
    quiet = 0
    for task in asyncio.all_tasks():
        if task is asyncio.current_task():
            continue
        chain = await_chain(task)
        if any(line.endswith((" in _get_message", " in _run_timer")) for line in chain):
            quiet += 1
            continue
        out.append(f"task {task.get_name()}:\n    " + "\n    ".join(chain))
    out.append(f"(and {quiet} timers and message pumps waiting for their next tick or message)")
    return "\n".join(out)


async def monkey_run(
    lm, checkpoint: str | None, target: str, seed: int, keys: int, size: tuple[int, int], errors_log: Path | None
) -> int:
    """One run: an app opened at `target` (the loading screen: loading `checkpoint`), then `keys`
    keys of `seed`'s stream, then q must quit it. An app that leaves on its own (the palette's
    Quit) is followed by a new one until the keys are sent. Returns the keys sent. A run still
    going after HANG_S seconds fails as a hang, naming what each task waits on."""
    run = asyncio.ensure_future(_monkey_run(lm, checkpoint, target, seed, keys, size, errors_log))
    done, _pending = await asyncio.wait([run], timeout=HANG_S)
    if run in done:
        return run.result()
    stacks = task_stacks()
    run.cancel()
    raise MonkeyFailure(f"hang: the run had not ended after {HANG_S} s\n  run: {target} {size[0]}x{size[1]} seed={seed}\n{stacks[:12000]}")


async def _monkey_run(
    lm, checkpoint: str | None, target: str, seed: int, keys: int, size: tuple[int, int], errors_log: Path | None
) -> int:
    from gpt2viz.options import RunOptions
    from gpt2viz.tui.app import make_app

    stream = acts(seed)
    sent = 0
    while sent < keys:
        await wait_for_idle_model()
        opener = OPENERS[target]
        app = make_app(options=RunOptions(model=checkpoint)) if opener is None else make_app(lm=lm)
        monkey = None
        try:
            async with app.run_test(size=size) as pilot:
                monkey = Monkey(app, pilot, seed, errors_log, label=f"{target} {size[0]}x{size[1]}")
                for key in opener or ():
                    await pilot.pause()
                    await monkey.send(Act("keys", keys=(key,)))
                await monkey.run(stream, keys - sent)
                sent += monkey.keys
                if not monkey.ended:
                    await monkey.quits()
                await until_ended(app)
        except MonkeyFailure:
            raise
        except Exception as err:  # raised by run_test for an exception in the app
            if monkey is None:
                raise
            raise monkey.failure(f"exception: {err!r}") from err
        monkey.check()
    return sent


def parse_acts(text: str) -> list[Act]:
    """Acts as the failure message writes them ('ctrl+p+pageup settle enter×2 resize:80x24+escape'),
    to replay one: each word one act, or a resize and keys sent with no pause between them."""
    out: list[Act] = []
    for word in text.split():
        if word == "settle":
            out.append(Act("settle"))
            continue
        if "×" in word:
            key, times = word.split("×")
            out.append(Act("keys", keys=(key,) * int(times)))
            continue
        keys: list[str] = []
        key = ""
        for part in word.split("+"):  # 'shift+tab' is one key: a modifier joins the next part
            if part.startswith("resize:"):
                if keys:
                    out.append(Act("keys", keys=tuple(keys)))
                    keys = []
                width, height = part.removeprefix("resize:").split("x")
                out.append(Act("resize", size=(int(width), int(height))))
                continue
            key = f"{key}+{part}" if key in ("shift", "ctrl", "alt") else part
            if key not in ("shift", "ctrl", "alt"):
                keys.append(key)
                key = ""
        if keys:
            out.append(Act("keys", keys=tuple(keys)))
    return out


async def replay(app, pilot, text: str, errors_log: Path | None = None) -> Monkey:
    """Sends the acts of `text` (each word an act, keys joined by + sent with no pause between
    them) to a running app and settles; fails as the monkey does."""
    monkey = Monkey(app, pilot, seed=-1, errors_log=errors_log, label=f"replay {text!r}", quit_keys=True)
    for act in parse_acts(text):
        await monkey.send(act)
        monkey.check()
    if not monkey.ended:
        await pilot.pause()
        monkey.check()
    return monkey


# The suite's monkey: every screen (OPENERS) in both languages on two models, KEYS_PER_RUN keys
# each, the sizes taking turns (40x12 is below the minimum: the room notice, keys still live).
KEYS_PER_RUN = 420
RUN_SIZES = ((80, 24), (120, 40), (40, 12))
DEFAULT_SEED = 29


def suite_seed() -> int:
    """The seed of this run: MONKEY_SEED from the environment, else a fixed one."""
    import os

    return int(os.environ.get("MONKEY_SEED", DEFAULT_SEED))


def case_seed(base: int, target: str, language: str, model: str) -> int:
    """One seed per run of the suite's monkey, the same for the same base seed."""
    import zlib

    return base * 1_000_003 + zlib.crc32(f"{target}/{language}/{model}".encode())


def run_case(lm, checkpoint: str, target: str, language: str, model: str, errors_log: Path, keys: int = KEYS_PER_RUN) -> int:
    """One run of the suite's monkey; returns the keys sent (raises MonkeyFailure)."""
    from gpt2viz.i18n import set_language

    index = list(OPENERS).index(target) + (language == "zh") + 2 * (model != "tiny")
    set_language(language)
    try:
        seed = case_seed(suite_seed(), target, language, model)
        return asyncio.run(monkey_run(lm, checkpoint, target, seed, keys, RUN_SIZES[index % len(RUN_SIZES)], errors_log))
    finally:
        set_language("en")
