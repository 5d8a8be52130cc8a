"""Guided lessons: the tutorials' stories told inside the app, one TOML file per lesson.

A lesson is data: its pages, in order, each naming
- `text`: the template of the page (gpt2viz/i18n/<language>/lessons.py), its placeholders filled
  with this run's numbers (gpt2viz/tui/lesson_facts.py names them);
- `show`: the stage the page drives the step-through to (a stage key: "tokenize",
  "blocks.0.pattern"; `blocks.last.` for the model's last block), and `head`, the attention head;
- `until` (optional): the stage the learner is asked to go to, and `until_head`: the head; the
  page is done when the step-through shows it; `do`, the template that says how, and `press`, the
  key (Textual's name: "right", "right_square_bracket") that does it;
- `until_screen` (optional): a screen the learner is asked to open ("generation", "cost_lab":
  SCREENS), with `do` and `press` as for `until`; the page is done when that screen opens; `look`
  (optional, with `until_screen`): the template that says, on that screen, what to look at there;
- `until_off` (optional, true): the page is done when the step-through shows a pass with a part
  of the model switched off (the what-if, `x`), with `do` and `press` as for `until`;
- `predict` (optional): a number the learner guesses before the app shows it (`answer`: the name
  of a measured fact; `tolerance`: how far off, as a fraction of it, still counts as right;
  `why`: the template that explains it; `reveal`, optional: the stage the step-through moves to
  once the guess is in, where the number shows, when `show` keeps it out of sight until then). An
  answer the cost lab measures on this machine
  (gpt2viz/tui/lesson_facts.py MEASURED) waits for it: such a page also names the cost lab in
  `until_screen`, and the guess is compared once the lab has run.

Adding a lesson needs no Python: a new file here and its templates in both languages
(tests/test_lessons.py checks every file against the stages, the facts and the templates).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from importlib import resources

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover (Python 3.10)
    import tomli as tomllib

LESSON_IDS = ("000", "001", "003", "004")  # in the order the lesson menu offers them

# The screens a page may ask the learner to open (`until_screen`), by the class that shows them.
SCREENS = {"generation": "GenerationScreen", "cost_lab": "CostLabScreen"}


@dataclass(frozen=True)
class Prediction:
    """A number the learner guesses before the app measures it."""

    question: str  # template key: what to guess
    answer: str  # the fact that is the measured answer
    tolerance: float  # how far off (a fraction of the answer) still counts as right
    why: str  # template key: how the answer comes about
    unit: str = ""  # "%" for a probability guessed in percent
    reveal: str | None = None  # stage key shown once the guess is in (the page's `show` hides the answer)


@dataclass(frozen=True)
class Page:
    text: str  # template key
    show: str  # stage key the page opens at
    head: int = 0
    until: str | None = None  # stage key the learner is asked to reach
    until_head: int | None = None
    do: str | None = None  # template key: how to get there
    press: str | None = None  # the key that gets there (tests press it)
    predict: Prediction | None = None
    until_screen: str | None = None  # a screen (SCREENS) the learner is asked to open
    look: str | None = None  # template key: what to look at on that screen, shown there
    until_off: bool = False  # done once a pass with a part switched off is on show (x)

    @property
    def asks(self) -> bool:
        """Whether the page waits for the learner (an action or a guess)."""
        return self.acts or self.predict is not None

    @property
    def acts(self) -> bool:
        """Whether the page asks for an action (a stage, a head or a screen to go to)."""
        return self.until is not None or self.until_head is not None or self.until_screen is not None or self.until_off


@dataclass(frozen=True)
class Lesson:
    id: str
    title: str  # template key
    tutorial: str  # the tutorial it follows (../shared/tutorials/ names them by number)
    pages: tuple[Page, ...]


class LessonError(ValueError):
    """A lesson file that is not what this module reads."""


def load_lesson(lesson_id: str) -> Lesson:
    """The lesson `lesson_id` ('000'), read from its file; LessonError for a broken one."""
    if lesson_id not in LESSON_IDS:
        raise LessonError(f"no lesson {lesson_id!r} (there are {', '.join(LESSON_IDS)})")
    text = resources.files(__package__).joinpath(f"{lesson_id}.toml").read_text(encoding="utf-8")
    try:
        data = tomllib.loads(text)
        pages = tuple(_page(p) for p in data["pages"])
        return Lesson(id=lesson_id, title=str(data["title"]), tutorial=str(data["tutorial"]), pages=pages)
    except (KeyError, TypeError, ValueError) as err:
        raise LessonError(f"lesson {lesson_id}: {err}") from err


def _page(fields: dict) -> Page:
    known = {"text", "show", "head", "until", "until_head", "until_screen", "do", "press", "predict", "look",
             "until_off"}
    if set(fields) - known:
        raise ValueError(f"unknown page fields {sorted(set(fields) - known)}")
    predict = fields.get("predict")
    if predict is not None:
        if set(predict) - {"question", "answer", "tolerance", "why", "unit", "reveal"}:
            raise ValueError(f"unknown prediction fields {sorted(predict)}")
        reveal = predict.get("reveal")
        predict = Prediction(str(predict["question"]), str(predict["answer"]), float(predict["tolerance"]),
                             str(predict["why"]), str(predict.get("unit", "")), None if reveal is None else str(reveal))
    until_head = fields.get("until_head")
    until_screen = fields.get("until_screen")
    if until_screen is not None and until_screen not in SCREENS:
        raise ValueError(f"no screen {until_screen!r} (there are {', '.join(SCREENS)})")
    if "look" in fields and until_screen is None:
        raise ValueError("look says what to look at on the screen of until_screen, and there is none")
    return Page(
        text=str(fields["text"]), show=str(fields["show"]), head=int(fields.get("head", 0)),
        until=fields.get("until"), until_head=None if until_head is None else int(until_head),
        do=fields.get("do"), press=fields.get("press"), predict=predict, until_screen=until_screen,
        look=fields.get("look"), until_off=bool(fields.get("until_off", False)),
    )
