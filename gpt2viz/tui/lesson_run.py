"""A lesson under way: which page is open, what the learner did, guessed and skipped, kept per
lesson in the user's state directory so that the next start resumes it.

The progress file is `$XDG_STATE_HOME/gpt2viz/lessons.json` (default `~/.local/state`): the
page each lesson is at and the pages done and skipped, and whether the lesson menu opens when the
app starts (`"menu": {"at_start": false}` once a lesson was chosen from it or the learner said never). It is rewritten whole through a
temporary file beside it; one that cannot be read starts the lessons afresh, and one that cannot
be written is left as it was (the lesson goes on; only the resuming is lost).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..crash_log import log_dir
from ..json_state import read_json, write_json
from ..lessons import SCREENS, Lesson, Page, Prediction
from ..trace import Trace
from .stages import build_stages, index_by_key

STATE_FILE = "lessons.json"
MENU = "menu"  # the progress file's entry of the lesson menu (no lesson has this id)


def state_path() -> Path:
    """$XDG_STATE_HOME/gpt2viz/lessons.json, beside the error log (gpt2viz/crash_log.py)."""
    return log_dir() / STATE_FILE


def stage_key(key: str, n_layer: int) -> str:
    """A page's stage key for this model: 'blocks.last.mlp' names the last block."""
    return key.replace("blocks.last.", f"blocks.{n_layer - 1}.")


# A number as a learner types it: 85000, 85,000, 85 000, 8.5e4, 85k, 1.2M, 4.5%, 1.5 MiB, 3万, .5.
_NUMBER = re.compile(r"^\s*([-+]?(?:\d+(?:[.,\s_]\d+)*(?:\.\d+)?|\.\d+)(?:e[-+]?\d+)?)\s*([a-z%万亿]*)\s*$", re.IGNORECASE)
_SCALES = {
    "": 1, "%": 1, "k": 1e3, "m": 1e6, "g": 1e9, "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "万": 1e4, "亿": 1e8,
}


def read_guess(text: str) -> float | None:
    """The number typed, or None for text that is not one (or below 0: every answer a lesson asks
    for is a count, a size, a time or a share; `read_number` tells the two apart)."""
    value = read_number(text)
    return value if value is not None and value >= 0 else None


def read_number(text: str) -> float | None:
    """The number typed, whatever its sign, or None for text that is not one."""
    match = _NUMBER.match(text.replace("，", ","))
    if match is None:
        return None
    digits, unit = match.groups()
    scale = _SCALES.get(unit.lower())
    if scale is None:
        return None
    # A comma, space or underscore between groups of three digits separates thousands.
    digits = re.sub(r"(?<=\d)[,\s_](?=\d{3}\b)", "", digits)
    try:
        value = float(digits) * scale
    except ValueError:
        return None
    return value if math.isfinite(value) else None


@dataclass
class Guess:
    value: float
    answer: float | None  # None: not measured yet (an answer the cost lab times); filled in then

    def close(self, prediction: Prediction) -> bool:
        return self.answer is not None and abs(self.value - self.answer) <= prediction.tolerance * abs(self.answer)


@dataclass
class LessonRun:
    """One lesson's pages and what the learner has done with them."""

    lesson: Lesson
    page: int = 0
    done: set[int] = field(default_factory=set)
    skipped: set[int] = field(default_factory=set)
    guesses: dict[int, Guess] = field(default_factory=dict)
    resumed: bool = False  # opened at the page the progress file kept

    @classmethod
    def start(cls, lesson: Lesson) -> LessonRun:
        """The lesson at the page where the learner left it (the first, the first time)."""
        saved = _read_state().get(lesson.id, {})
        n = len(lesson.pages)
        run = cls(lesson)
        try:
            page = int(saved.get("page", 0))
            run.done = {int(i) for i in saved.get("done", []) if 0 <= int(i) < n}
            run.skipped = {int(i) for i in saved.get("skipped", []) if 0 <= int(i) < n} - run.done
        except (TypeError, ValueError, AttributeError):
            page, run.done, run.skipped = 0, set(), set()
        run.page = page if 0 <= page < n else 0
        run.resumed = run.page > 0
        return run

    @property
    def current(self) -> Page:
        return self.lesson.pages[self.page]

    @property
    def last(self) -> bool:
        return self.page == len(self.lesson.pages) - 1

    def target(self, trace: Trace, stages: list | None = None) -> tuple[int | None, int]:
        """The stage index (in `stages`, the trace's) and head the current page shows (None: the
        stage is not in this trace)."""
        page = self.current
        stages = build_stages(trace.n_layer, trace.architecture) if stages is None else stages
        key = page.show
        made = self.guesses.get(self.page)
        if page.predict is not None and page.predict.reveal is not None and made is not None and made.answer is not None:
            key = page.predict.reveal  # guessed already: the stage that shows the number, as on answering
        index = index_by_key(stages, stage_key(key, trace.n_layer))
        return index, page.head

    def observe(self, stage: str, head: int, n_layer: int, switched_off: bool = False) -> bool:
        """The step-through shows `stage` (a key) and `head`, of a pass with a part switched off or
        not: True when that completes the page."""
        page = self.current
        if self.page in self.done or page.predict is not None or page.until_screen is not None or not page.acts:
            return False
        reached = page.until is None or stage == stage_key(page.until, n_layer)
        on_head = page.until_head is None or head == page.until_head
        if reached and on_head and (switched_off or not page.until_off):
            self.done.add(self.page)
            self.skipped.discard(self.page)
            self.save()
            return True
        return False

    def observe_screen(self, screen_class: str) -> bool:
        """A screen of class `screen_class` ('GenerationScreen') just opened: True when the page
        asked for it (and is done now)."""
        page = self.current
        if self.page in self.done or page.until_screen is None or SCREENS[page.until_screen] != screen_class:
            return False
        self.done.add(self.page)
        self.skipped.discard(self.page)
        self.save()
        return True

    def guess(self, value: float, answer: float | None) -> Guess:
        """Records a guess at the current page's prediction against the measured `answer` (None:
        to be measured; the guess is kept and compared then)."""
        made = self.guesses[self.page] = Guess(value, answer)
        self.done.add(self.page)
        self.skipped.discard(self.page)
        self.save()
        return made

    def fill(self, answers: dict[str, float]) -> None:
        """Gives each guess the answer of the run on show, so that its verdict is this run's: the
        pass's own (a prompt edited or a part switched off since gives another), or the cost lab's
        latest measurement, None while there is none (not run yet, or run again and stopped before
        it measured it)."""
        for page, made in self.guesses.items():
            prediction = self.lesson.pages[page].predict
            if prediction is not None:
                made.answer = answers.get(prediction.answer)

    def turn(self, delta: int) -> bool:
        """Moves `delta` pages (n: +1, p: -1); a page left undone is marked skipped. False at an end."""
        page = self.page + delta
        if not 0 <= page < len(self.lesson.pages):
            return False
        if delta > 0 and self.current.asks and self.page not in self.done:
            self.skipped.add(self.page)
        self.page = page
        self.save()
        return True

    def save(self) -> None:
        state = _read_state()
        state[self.lesson.id] = {"page": self.page, "done": sorted(self.done), "skipped": sorted(self.skipped)}
        _write_state(state)


def forget_progress(lesson_id: str) -> None:
    """Lesson `lesson_id` opens at its first page again, nothing in it done or skipped."""
    state = _read_state()
    if state.pop(lesson_id, None) is not None:
        _write_state(state)


def menu_at_start() -> bool:
    """Whether the lesson menu opens as the app starts: until a lesson is chosen from it or the
    learner asks it never to (not now: it opens again next time)."""
    return _read_state().get(MENU, {}).get("at_start", True) is not False


def stop_menu_at_start() -> None:
    state = _read_state()
    state[MENU] = {"at_start": False}
    _write_state(state)


@dataclass(frozen=True)
class Progress:
    """How far the learner got in a lesson, as the progress file says."""

    page: int  # the page the lesson opens at (0: the first)
    done: int  # pages whose action or guess was done
    asks: int  # pages that ask for an action or a guess
    pages: int

    @property
    def started(self) -> bool:
        return self.page > 0 or self.done > 0


def progress(lesson: Lesson) -> Progress:
    run = LessonRun.start(lesson)
    return Progress(run.page, len(run.done), sum(page.asks for page in lesson.pages), len(lesson.pages))


def _read_state() -> dict:
    try:
        data = read_json(state_path())
    except RuntimeError:  # no home directory
        return {}
    return {k: v for k, v in data.items() if isinstance(v, dict)} if isinstance(data, dict) else {}


def _write_state(state: dict) -> None:
    try:
        write_json(state_path(), state)
    except RuntimeError:  # no home directory
        pass
