"""The lesson menu: every lesson with how far the learner got; Enter opens one where it was left.

It opens with the `i` key from every screen, and by itself as the app starts until the learner
chooses a lesson from it or asks it not to (tui/lesson_run.py keeps that); Escape is "not now";
`r` opens the highlighted lesson at its first page, its progress forgotten. On a model that is
not GPT-2 the lessons are listed but cannot be opened, and the menu says why.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from ...i18n import N_
from ...i18n.templates import say
from ...lessons import LESSON_IDS, load_lesson
from ..lesson_run import Progress, forget_progress, progress
from .base import AppModal

NEVER = "never"  # the menu's answer: do not open at start again


def progress_line(p: Progress) -> str:
    if not p.started:
        return say("lesson.menu.new", pages=p.pages)
    if p.page == p.pages - 1 and p.done >= p.asks:
        return say("lesson.menu.finished", pages=p.pages, done=p.done, asks=p.asks)
    return say("lesson.menu.at", page=p.page + 1, pages=p.pages, done=p.done, asks=p.asks)


class LessonMenu(AppModal[str | None]):
    """Lists the lessons; Enter opens the one highlighted (its id is the result), Escape none.
    `at_start`: opened by the app's start, so it also offers never to open so again (NEVER)."""

    # Below 30 rows the box drops its blank rows (app.tcss), so every choice stays in sight.
    VERTICAL_BREAKPOINTS = [(0, "-short"), (30, "-tall")]
    BINDINGS = [
        Binding("escape", "cancel", N_("not now"), id="cancel-lesson-menu", tooltip=N_("Close the menu; no lesson")),
        Binding("r", "start_over", N_("from the start"), id="lesson-menu-start-over",
                tooltip=N_("Open the highlighted lesson at its first page, what was done in it forgotten")),
        Binding("q", "app.quit", N_("quit"), id="lesson-menu-quit", show=False, tooltip=N_("Leave gpt2viz")),
        # A modal screen hides the app's keys: the language switch, again, for a list of words.
        Binding("L", "app.switch_language", N_("中文"), id="lesson-menu-switch-language", show=False,
                tooltip=N_("Show the app in Chinese (again: back to English)")),
    ]

    def __init__(self, at_start: bool = False, *, opens: bool = True) -> None:
        """`opens`: whether a lesson can open on this run's model (the lessons are GPT-2's)."""
        super().__init__()
        self.at_start = at_start
        self.opens = opens
        self.choices: list[str | None] = []

    def compose(self) -> ComposeResult:
        with Vertical(id="lesson-menu-box"):
            yield Static(id="lesson-menu-title")
            yield Static(id="lesson-menu-intro", markup=False)
            yield OptionList(id="lesson-menu-list")

    def on_mount(self) -> None:
        self.redraw_language()
        self.query_one(OptionList).focus()

    def redraw_language(self) -> None:
        self.query_one("#lesson-menu-title", Static).update(Content.styled(say("lesson.menu.title"), "bold"))
        intro = "lesson.menu.intro_start" if self.at_start else "lesson.menu.intro"
        self.query_one("#lesson-menu-intro", Static).update(say(intro if self.opens else "lesson.gpt2_only"))
        options = self.query_one(OptionList)
        highlighted = options.highlighted
        items: list[Option] = []
        self.choices = []
        for lesson_id in LESSON_IDS:
            lesson = load_lesson(lesson_id)
            items.append(Option(Content(say("lesson.menu.item", lesson=lesson_id, title=say(lesson.title),
                                            progress=progress_line(progress(lesson)))), disabled=not self.opens))
            self.choices.append(lesson_id)
        items.append(Option(Content(say("lesson.menu.not_now"))))
        self.choices.append(None)
        if self.at_start:
            items.append(Option(Content(say("lesson.menu.never"))))
            self.choices.append(NEVER)
        options.clear_options()
        options.add_options(items)
        first = 0 if self.opens else len(LESSON_IDS)  # "Not now": the lessons cannot be chosen
        options.highlighted = highlighted if highlighted is not None else first

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.close(self.choices[event.option_index])

    def action_cancel(self) -> None:
        self.close(None)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "start_over":  # only where a lesson is highlighted and can open
            return self.opens and self._highlighted_lesson() is not None
        return True

    def on_option_list_option_highlighted(self, _event: OptionList.OptionHighlighted) -> None:
        self.refresh_bindings()

    def action_start_over(self) -> None:
        lesson_id = self._highlighted_lesson()
        if self.opens and lesson_id is not None:
            forget_progress(lesson_id)
            self.close(lesson_id)

    def _highlighted_lesson(self) -> str | None:
        index = self.query_one(OptionList).highlighted
        choice = self.choices[index] if index is not None and index < len(self.choices) else None
        return choice if choice in LESSON_IDS else None
