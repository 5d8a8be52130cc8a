"""The lesson's page under the step-through: its text with this run's numbers, what to do, and a
field for a guess where the page asks for one (gpt2viz/tui/lesson_run.py holds the state; the
screen hands this widget what to show). On a screen a page sent the learner to (the generation
view, the cost lab), a LessonNote says what to look at there."""

from __future__ import annotations

import math

from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Input, Rule, Static

from ...i18n import _, say
from ...i18n.layout import wrap_wide
from ..formatting import UNKNOWN, count, num
from ..lesson_facts import MEASURED, lesson_facts, page_text
from ..lesson_run import LessonRun
from .laid import Laid
from .safe_input import FieldInput


class GuessInput(FieldInput):
    """The field for a guess: a number and its unit only (85k, 1.2 MiB, 4.5%, 3万). From an empty
    field, n and p (which no guess holds) turn the lesson's pages and the page's own key does what
    the page says; once something is typed, every letter stays the field's, taken or refused, so
    that a word typed there ('nan', 'inf', 'nine') never turns a page and runs the step-through's
    keys with the letters after it (a crash walk: 'inf' and enter opened the lesson menu and
    switched lessons)."""

    # A minus too, so that a negative guess is refused with a reason rather than changed unseen.
    GUESS_CHARACTERS = r"[0-9.,，\s_eE+\-%kKmMgGbBiI万亿]*"

    # The key the page asks for to measure its answer (`press`: m opens the cost lab). No guess
    # starts with a unit, so in an empty field that key leaves the field and does what the page
    # says, rather than typing an m for "million" (a learner walk: lesson 004's "press m").
    page_key: str | None = None

    def on_key(self, event: events.Key) -> None:
        if not self.value and event.key in ("n", "p", self.page_key):
            event.prevent_default()  # not typed (Input's own handler is its base class's)
            event.stop()
            self.screen.set_focus(None)
            self.app.simulate_key(event.key)  # now the screen's key


class LessonText(Laid):
    """The page's text, laid out for the panel's width: Chinese lines break between characters and
    keep a run of Latin letters and digits whole (i18n/layout.py), where a plain widget would fold
    'GPT-2' anywhere."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.text = ""  # as written, before it is laid out

    def update(self, text: str) -> None:
        self.text = text
        self.show(lambda width: wrap_wide(text, width))


class LessonPanel(Vertical):
    """Hidden until a lesson runs (`show`); a guess typed into its field is posted as `Guessed`."""

    DEFAULT_CSS = """
    LessonPanel { height: auto; max-height: 60%; display: none; background: $surface; }
    LessonPanel #lesson-rule { height: 1; margin: 0; color: $accent; }
    LessonPanel.-on { display: block; }
    LessonPanel #lesson-text { height: auto; padding: 0 1; }
    LessonPanel #lesson-guess { display: none; width: 40; margin: 0 1; }
    LessonPanel.-guessing #lesson-guess { display: block; }
    """

    class Guessed(Message):
        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def compose(self) -> ComposeResult:
        # A rule of its own, not a border: Textual's auto height left a bordered panel a row short.
        yield Rule(id="lesson-rule", line_style="solid")
        yield LessonText(id="lesson-text")
        # Disabled but where a page asks for a guess: never focused otherwise (not even as the
        # screen's first focusable widget), so the step-through's keys stay the screen's.
        yield GuessInput(id="lesson-guess", compact=True, placeholder=_("your guess"),
                         restrict=GuessInput.GUESS_CHARACTERS, disabled=True)

    def show(self, run: LessonRun | None, facts: dict[str, str], answers: dict[str, float], replay: bool,
             unavailable: frozenset[str] = frozenset(), busy_share: float | None = None,
             edited: tuple[str, str] | None = None) -> None:
        """Draws `run`'s current page (hides the panel when there is no lesson). `unavailable`: the
        screens (gpt2viz.lessons.SCREENS) that cannot open here (a replay with no generation), and
        "what_if" where nothing can be switched off (a replay).
        `answers` may lack what the cost lab has not measured yet: a guess at it waits; one
        measured while other processes took `busy_share` of the CPUs is compared under a warning
        (a learner on a busy machine once never got an answer). `edited`:
        the parts switched off in the pass on show and the key that switches them on again (the
        page's numbers are then that pass's, and the page says so)."""
        self.set_class(run is not None, "-on")
        if run is None:
            self.set_class(False, "-guessing")
            self.query_one("#lesson-guess", Input).disabled = True
            return
        page = run.current
        lesson = run.lesson
        lines = [
            say("lesson.header", lesson=lesson.id, title=say(lesson.title), page=run.page + 1, pages=len(lesson.pages)),
            say(page_text(page.text, facts), **facts),
        ]
        if page.predict is not None:
            lines.append(say(page.predict.question, **facts))
            made = run.guesses.get(run.page)
            measured = answers.get(page.predict.answer)
            if page.predict.answer not in MEASURED:  # a busy machine says nothing of a size
                busy_share = None
            if made is not None and (made.answer is None or measured is None):
                key = "lesson.guess.pending_replay" if replay else "lesson.guess.pending"
                lines.append(say(key, guess=_number(made.value, page.predict.unit)))
            elif made is not None:
                if busy_share is not None:  # compared all the same, and said under what it was measured
                    lines.append(say("lesson.guess.busy", share=f"{busy_share:.0%}"))
                lines.append(self._verdict(made, page.predict, answers))
                lines.append(say(page.predict.why, **facts))
            if measured is None and page.do is not None and not replay:  # how to measure it
                lines.append(say(page.do, **facts))
        elif (needs := page.until_screen or ("what_if" if page.until_off else None)) in unavailable and run.page not in run.done:
            lines.append(say(f"lesson.unavailable.{needs}"))  # what to do instead
        elif page.do is not None and run.page not in run.done:
            lines.append(say(page.do, **facts))
        if run.page in run.done and page.predict is None:
            lines.append(say("lesson.done"))
        elif run.page in run.skipped:
            lines.append(say("lesson.skipped"))
        if edited is not None:
            lines.append(say("lesson.edited", parts=edited[0], undo=edited[1]))
        if replay:
            lines.append(say("lesson.replay_note"))
        if run.last:
            lines.append(say("lesson.finished"))
        guessing = page.predict is not None
        lines.append(say("lesson.keys_guess" if guessing else "lesson.keys"))
        self.query_one("#lesson-text", LessonText).update("\n".join(lines))
        self.set_class(guessing, "-guessing")
        field = self.query_one("#lesson-guess", GuessInput)
        field.disabled = not guessing
        field.page_key = page.press if guessing and page.do is not None else None
        field.placeholder = _("your guess")  # in the language now shown
        if not guessing:
            field.value = ""

    @staticmethod
    def _verdict(made, prediction, answers) -> str:
        guess, answer = _number(made.value, prediction.unit), _number(made.answer, prediction.unit)
        if guess == answer:  # the same number as the screens write it
            return say("lesson.guess.exact", guess=guess)
        if made.close(prediction):
            return say("lesson.guess.close", guess=guess, answer=answer, tolerance=f"{prediction.tolerance:.0%}")
        if made.answer == 0 or made.value == 0:  # no ratio to 0 (a one-token prompt masks 0 scores)
            return say("lesson.guess.off", guess=guess, answer=answer)
        if made.answer > made.value:
            return say("lesson.guess.above", guess=guess, answer=answer, ratio=_ratio(made.answer / made.value))
        return say("lesson.guess.below", guess=guess, answer=answer, ratio=_ratio(made.value / made.answer))

    def guess_field(self) -> Input:
        return self.query_one("#lesson-guess", Input)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.post_message(self.Guessed(event.value))


# From here on a number is written with a power of ten: a guess of 1e30 read back as
# 1,000,000,000,000,000,019,884,624,838,656 (the float's own digits).
HUGE = 1e15


def _huge(value: float) -> str:
    """1e+30, 6.58e+24: three digits and a power of ten."""
    return f"{value:.3g}"


def _number(value: float, unit: str) -> str:
    """A guess or an answer as the screens write such numbers: counts with separators."""
    if not math.isfinite(value):
        return UNKNOWN
    if abs(value) >= HUGE:
        return _huge(value) + unit
    whole = abs(value) >= 1000 or value == int(value)
    return (count(round(value)) if whole else num(value)) + unit


def _ratio(r: float) -> str:
    """How many times: 1.2, 16, 16,056, 6.58e+24."""
    if r >= HUGE:
        return _huge(r)
    return count(round(r)) if r >= 100 else num(r, 2)


class LessonNote(Static):
    """A line or two above the footer of a screen a lesson page sent the learner to: which page, what
    to look at here (the page's `look`), and that escape goes back to the lesson."""

    DEFAULT_CSS = """
    LessonNote { height: auto; max-height: 5; padding: 0 1; background: $surface; color: $text;
                 border-top: solid $accent; display: none; }
    LessonNote.-on { display: block; }
    """

    def __init__(self, screen_name: str, *, id: str | None = None) -> None:
        super().__init__(id=id, markup=False)
        self.screen_name = screen_name  # its key in gpt2viz.lessons.SCREENS

    def draw_from(self, session) -> None:
        """Shows the lesson of `session` (tui/session.py) as it stands, with its run's numbers."""
        run = session.lesson
        self.show(run, lesson_facts(session.trace) if run is not None and session.trace is not None else {})

    def show(self, run: LessonRun | None, facts: dict[str, str]) -> None:
        """Shown while `run`'s page is the one that asked for this screen and says what to look at."""
        page = run.current if run is not None else None
        on = page is not None and page.until_screen == self.screen_name and page.look is not None
        self.set_class(on, "-on")
        if on:
            self.update(say("lesson.note", lesson=run.lesson.id, page=run.page + 1, pages=len(run.lesson.pages),
                            look=say(page.look, **facts)))
