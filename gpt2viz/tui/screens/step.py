"""The step-through screen: navigator, stage view and side panel over one recorded Trace."""

from __future__ import annotations


from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container


from ...i18n import N_, _, count, say
from ...trace import Trace
from ..commands import StageCommands
from ..facts import StepChoice
from ..language import key_name
from ..formatting import parts_off
from ..stages import Stage, block_jump, build_stages, index_by_key, index_of
from ..lesson_facts import lesson_answers, lesson_facts, measured
from ..lesson_run import read_guess, read_number, stage_key
from ..widgets.before_after import BeforeAfter
from ..widgets.lesson_panel import LessonPanel
from ..widgets.pipeline_nav import PipelineNavigator
from ..widgets.side_panel import SidePanel
from ..widgets.stage_view import StageView
from ..widgets.top_bar import TopBar
from ..widgets.footer import AppFooter
from .base import AppScreen

STAGE = Binding.Group(N_("stage"), compact=True)
BLOCK = Binding.Group(N_("block"), compact=True)
HEAD = Binding.Group(N_("head"), compact=True)
# How to read the step-through (it names no keys: the help's key list is right above it).
READING = N_(
    "How to read it: the left column lists every stage of one forward pass, in order; the middle shows "
    "the current stage: what happens, its formula, the shapes of this run's tensors, and a picture of "
    "the real numbers. Under the list (in a column of its own at the right on terminals 150 or more "
    "wide) are the shapes met so far and the KV cache the pass leaves behind. Heatmaps: blue to orange "
    "for signed values, dark purple to yellow for probabilities; grey cells are masked (the future). "
    "␣ is a space, ↵ a line break."
)
WIDE = 150  # columns from which the side panel has a column of its own (see the app's breakpoints)


class StepScreen(AppScreen[None]):
    """Steps through the stages of one forward pass; every step re-renders from the Trace. The
    app's first screen shows the session's trace (and the parts switched off in it); one opened
    from a generation step (`from_step`) shows that step's pass and goes back with escape."""

    COMMANDS = {StageCommands}
    PALETTE_TEXT = N_("Command palette: jump to any stage by name")
    # Nothing is focused for the screen when it comes back (after the palette, the help, another
    # screen): Textual's default would focus its first focusable widget, a lesson's guess field,
    # which would then take the step-through's keys as text. The field is focused only by a page
    # that asks for a guess (`_focus_a_guess`).
    AUTO_FOCUS = ""

    BINDINGS = [
        Binding("left,h", "previous_stage", N_("stage"), id="previous-stage", tooltip=N_("Go back one stage"), group=STAGE),
        Binding("right,l,space", "next_stage", N_("stage"), id="next-stage", tooltip=N_("Go to the next stage"), group=STAGE),
        Binding("left_square_bracket", "previous_block", N_("block"), id="previous-block",
                tooltip=N_("Same step, one block earlier"), group=BLOCK),
        Binding("right_square_bracket", "next_block", N_("block"), id="next-block",
                tooltip=N_("Same step, one block later"), group=BLOCK),
        Binding("comma", "previous_head", N_("head"), id="previous-head", tooltip=N_("Show the previous attention head"), group=HEAD),
        Binding("full_stop", "next_head", N_("head"), id="next-head", tooltip=N_("Show the next attention head"), group=HEAD),
        Binding("a", "all_heads", N_("heads"), id="all-heads", tooltip=N_("All heads of this block (again: back to one head)")),
        # Out of the footer (no room at 80 columns): the side panel's border and the help name it.
        Binding("o", "show_map", N_("map"), id="show-map", show=False,
                tooltip=N_("The map of the model: where this stage sits in the whole data flow, with this model's sizes")),
        Binding("home", "first_stage", N_("first stage"), id="first-stage", tooltip=N_("Go to the first stage"), show=False),
        Binding("end", "last_stage", N_("last stage"), id="last-stage", tooltip=N_("Go to the last stage"), show=False),
        # Not in the footer (at 80 columns it has no room for them); the stage view says when there
        # is more below, and the help lists them.
        Binding("up,k", "scroll_up", N_("scroll"), id="scroll-up", tooltip=N_("Scroll the stage view up"), show=False),
        Binding("down,j", "scroll_down", N_("scroll"), id="scroll-down", tooltip=N_("Scroll the stage view down"), show=False),
        Binding("pageup", "page_up", N_("page up"), id="page-up", tooltip=N_("Scroll the stage view a page up"), show=False),
        Binding("pagedown", "page_down", N_("page down"), id="page-down", tooltip=N_("Scroll the stage view a page down"), show=False),
        Binding("e", "edit_prompt", N_("edit"), id="edit-prompt", tooltip=N_("Change the prompt and run the model again")),
        # What if: out of the footer (no room at 80 columns); the help lists them, and an edited
        # pass names the undo and clear keys where it shows its before and after.
        Binding("x", "what_if", N_("switch off"), id="what-if", show=False,
                tooltip=N_("Switch a part of this block off (a head, the MLP, neurons, the block) and run again")),
        Binding("u", "undo_intervention", N_("undo"), id="undo-intervention", show=False,
                tooltip=N_("Undo the last part switched off")),
        Binding("U", "clear_interventions", N_("clear"), id="clear-interventions", show=False,
                tooltip=N_("Switch every part back on: the model's own pass")),
        Binding("g", "generate", N_("generate"), id="generate", tooltip=N_("Open the generation view")),
        # Out of the footer (full at 80 columns): the side panel and the cost panel name it.
        Binding("m", "cost_lab", N_("cost lab"), id="cost-lab", show=False,
                tooltip=N_("Measure what inference costs here: cache, batch size, number formats")),
        Binding("w", "attribution", N_("which parts"), id="attribution", show=False,
                tooltip=N_("Which parts wrote the answer: direct logit attribution and activation patching")),
        Binding("escape", "back", N_("back"), id="back-to-generation", tooltip=N_("Back to the generation view")),
        # A lesson's pages (only while one runs: check_action). The lesson's panel names both keys
        # under every page, so the footer does not: at 80 columns "n next page" pushed q out of it.
        Binding("n", "lesson_next", N_("next page"), id="lesson-next", show=False, tooltip=N_("The lesson's next page")),
        Binding("p", "lesson_previous", N_("previous page"), id="lesson-previous", show=False,
                tooltip=N_("The lesson's previous page")),
    ]

    def __init__(
        self,
        session,
        trace: Trace,
        from_step: int | None = None,
        chosen: StepChoice | None = None,
        changes: list[dict] | None = None,
    ) -> None:
        super().__init__(session)
        self.trace = trace
        self.replay = session.replay_path
        self.from_step = from_step  # the generation step whose forward pass this is, opened from that view
        self.chosen = chosen  # the token that generation step chose (sampling may differ from the argmax)
        self.changes = changes  # what the parts switched off did to the prediction (before -> after)
        self.stages: list[Stage] = build_stages(trace.n_layer, trace.architecture)
        # Opened from a generation step: start where that step's token is chosen.
        self.index = 0 if from_step is None else len(self.stages) - 1
        self.head = 0
        self._mounted = False  # on_mount draws; before it nothing is composed to draw into

    def compose(self) -> ComposeResult:
        yield TopBar(id="top-bar")
        with Container(id="body"):
            yield PipelineNavigator(id="navigator")
            yield StageView(id="stage-view")
            yield SidePanel(id="side-panel")
        yield LessonPanel(id="lesson-panel")
        yield AppFooter()

    def on_mount(self) -> None:
        self._mounted = True
        if self.lesson is not None:  # started with --lesson: open at the lesson's page
            self._move_to_lesson_page()
        self.query_one(PipelineNavigator).set_stages(self.stages, self.index)
        self._draw_top_bar()
        self._draw()
        self._focus_a_guess()

    def on_resize(self, event: events.Resize) -> None:
        # Below 100 columns every key fits only in the compact footer.
        self.query_one(AppFooter).compact = event.size.width < 100

    def _draw_top_bar(self) -> None:
        if not self._mounted:
            return
        chosen = None if self.chosen is None else self.chosen.text
        self.query_one(TopBar).draw(self.trace, self.replay, self.from_step, chosen, self.session.verification)

    @property
    def is_main(self) -> bool:
        """Whether this is the app's step-through of the session's trace (not a generation step's)."""
        return self.from_step is None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "back":
            return not self.is_main
        if action in ("lesson_next", "lesson_previous"):
            return self.lesson is not None
        if action == "edit_prompt":
            return self.is_main
        # what_if, undo and clear answer everywhere (they are not in the footer): on a step opened
        # from the generation view, with a notice of where they work (they once did nothing, unseen).
        return True

    @property
    def stage(self) -> Stage:
        """The stage on screen."""
        return self.stages[self.index]

    @property
    def n_head(self) -> int:
        return int(self.trace.model["config"]["n_head"])

    # -- showing ---------------------------------------------------------------------------
    def go_to(self, index: int) -> None:
        """Shows stage `index` (clamped to the pipeline)."""
        index = max(0, min(len(self.stages) - 1, index))
        if index == self.index:
            self.app.bell()
            return
        self.index = index
        if not self._mounted:  # pushed, not composed yet (a key the moment it appears): on_mount draws it
            return
        self.query_one(PipelineNavigator).set_current(index)
        self._draw()

    def set_head(self, head: int) -> None:
        """Selects attention head `head` (wrapping around); shown at the attention stages."""
        self.head = head % self.n_head
        if self.stage.is_attention:
            self._draw(new_stage=False)
        else:
            self.app.notify(
                _("Head {head} of {n_head} will be shown at the attention stages.").format(head=self.head, n_head=count(self.n_head)),
                timeout=2, replaces="head",
            )

    def load_trace(self, trace: Trace, changes: list[dict] | None = None) -> None:
        """Shows a new trace (an edited prompt, parts switched off), staying at the same stage."""
        key = self.stage.key
        self.trace, self.changes = trace, changes
        self.stages = build_stages(trace.n_layer, trace.architecture)
        found = index_by_key(self.stages, key)
        self.index = found if found is not None else 0
        self.head = min(self.head, self.n_head - 1)
        if not self._mounted:
            return
        self.query_one(PipelineNavigator).set_stages(self.stages, self.index)
        self._draw_top_bar()
        self._draw()

    def help_text(self) -> str:
        """How to read the step-through, in the current language."""
        return _(READING)

    def redraw_language(self) -> None:
        """Redraws every text in the language just chosen, at the same stage and head."""
        if not self._mounted:
            return
        self.query_one(PipelineNavigator).set_stages(self.stages, self.index)
        self._draw_top_bar()
        self.query_one(SidePanel).name_the_lab()
        self._draw(new_stage=False)

    def verified(self) -> None:
        """The check against transformers ended: the top bar says how it went."""
        self._draw_top_bar()

    def _run_sampling(self) -> str:
        """How the session's generation samples, in short ('' for greedy): said at the prompt's pass."""
        from ..generation import decoding_label

        sampling = self.session.generation_settings.sampling
        return "" if sampling.greedy else decoding_label(sampling, short=True)

    def on_screen_resume(self) -> None:
        # Back from a screen a lesson page asked for (the generation view, the cost lab): done now.
        if self._mounted and self.lesson is not None:
            self._draw_lesson()
            # The step-through's keys are the screen's again (m runs the lab again, as the page says),
            # not a guess field's that kept the focus while the other screen was on; unless the page
            # still waits for a guess: typing goes there again (and its key, m, still opens the lab).
            if self.query_one(LessonPanel).guess_field().has_focus:
                self.set_focus(None)
            self._focus_a_guess()

    def _draw(self, new_stage: bool = True) -> None:
        if not self._mounted:
            return
        self.query_one(StageView).draw(self.trace, self.stages, self.index, self.head, new_stage, chosen=self.chosen,
                                       run_sampling=self._run_sampling(), replay=self.replay is not None)
        # Before -> after, where the prediction is read: the next token and the logit lens.
        shows_prediction = self.stage.kind in ("next_token", "logit_lens") and self.is_main
        self.query_one(BeforeAfter).draw(self.trace.interventions, self.changes if shows_prediction else None)
        self.query_one(SidePanel).draw(self.trace, self.stages, self.index)
        lesson = self.lesson
        if lesson is not None:
            # The page asked for this stage, head, or a pass with a part switched off?
            lesson.observe(self.stage.key, self.head, self.trace.n_layer, switched_off=bool(self.trace.interventions))
        self._draw_lesson()

    # -- a lesson (gpt2viz/lessons, tui/lesson_run.py) -----------------------------------------
    @property
    def lesson(self):
        """The lesson under way, shown on the app's step-through (not a generation step's)."""
        return self.session.lesson if self.is_main else None

    def start_lesson(self) -> None:
        """The session's lesson was just started (the palette): show its page."""
        if self._mounted and self.lesson is not None:
            self._move_to_lesson_page()
            self.query_one(PipelineNavigator).set_current(self.index)
            self._draw()
            self._focus_a_guess()

    def _move_to_lesson_page(self) -> None:
        index, head = self.lesson.target(self.trace, self.stages)
        if index is not None:
            self.index = index
        self.head = head % self.n_head

    def _draw_lesson(self) -> None:
        lesson = self.lesson
        if lesson is not None and self.trace.architecture != "gpt2":  # --lesson with a LLaMA-family model
            self.session.lesson = lesson = None
            self.notify(say("lesson.gpt2_only"), markup=False)
        panel = self.query_one(LessonPanel)
        if lesson is None:
            panel.show(None, {}, {}, replay=False)
            return
        live = self.session.live
        # A replay opens the generation view only on a generation it recorded, and switches no
        # part off (that runs the model).
        unavailable = frozenset(() if live else ("what_if",) + (() if self.trace.generation else ("generation",)))
        facts, answers, busy = self._lesson_numbers()
        lesson.fill(answers)  # each verdict against the run on show (an edited prompt has other answers)
        parts = self.trace.interventions
        edited = (parts_off(parts), key_name(self, "undo_intervention")) if parts else None
        panel.show(lesson, facts, answers, replay=not live, unavailable=unavailable, busy_share=busy, edited=edited)
        if lesson.current.predict is None and panel.guess_field().has_focus:
            self.set_focus(None)

    def _lesson_numbers(self) -> tuple[dict[str, str], dict[str, float], float | None]:
        """A lesson's placeholders and answers: this trace's, and what the cost lab has timed on
        this machine (and the share of the CPUs others took meanwhile, where the machine was busy)."""
        lab = measured(self.session.lab_result_for_model())
        return ({**lesson_facts(self.trace), **lab.facts}, {**lesson_answers(self.trace), **lab.answers},
                lab.busy_share)

    def _focus_a_guess(self) -> None:
        """A page just opened that asks for a guess: what is typed goes into its field (escape leaves
        it, and the step-through's keys are the screen's again until the next page)."""
        lesson = self.lesson
        if lesson is not None and lesson.current.predict is not None and lesson.page not in lesson.guesses:
            self.query_one(LessonPanel).guess_field().focus()

    def _turn_lesson_page(self, delta: int) -> None:
        lesson = self.lesson
        if lesson is None or not lesson.turn(delta):
            self.app.bell()
            return
        self._move_to_lesson_page()
        self.query_one(PipelineNavigator).set_current(self.index)
        self._draw()
        self._focus_a_guess()

    def action_lesson_next(self) -> None:
        self._turn_lesson_page(+1)

    def action_lesson_previous(self) -> None:
        self._turn_lesson_page(-1)

    def on_lesson_panel_guessed(self, message: LessonPanel.Guessed) -> None:
        lesson = self.lesson
        if lesson is None or lesson.current.predict is None:
            return
        value = read_guess(message.text)
        if value is None:
            number = read_number(message.text)
            said = "lesson.guess.unreadable" if number is None else "lesson.guess.negative"
            self.notify(say(said), severity="warning", timeout=4)
            return
        predict = lesson.current.predict
        made = lesson.guess(value, self._lesson_numbers()[1].get(predict.answer))
        field = self.query_one(LessonPanel).guess_field()
        field.value = ""
        if made.answer is not None and predict.reveal is not None:  # to the stage that shows the number
            found = index_by_key(self.stages, stage_key(predict.reveal, self.trace.n_layer))
            if found is not None and found != self.index:
                self.go_to(found)
        self._draw_lesson()
        if made.answer is None or made.close(lesson.current.predict):  # kept for the measurement, or right
            self.set_focus(None)  # done: the step-through's keys are the screen's again
        else:
            field.focus()  # another try (n still turns the page: widgets/lesson_panel.py)

    def on_pipeline_navigator_stage_chosen(self, message: PipelineNavigator.StageChosen) -> None:
        self.go_to(message.index)

    # -- actions ---------------------------------------------------------------------------
    def action_next_stage(self) -> None:
        self.go_to(self.index + 1)

    def action_previous_stage(self) -> None:
        self.go_to(self.index - 1)

    def action_first_stage(self) -> None:
        self.go_to(0)

    def action_last_stage(self) -> None:
        self.go_to(len(self.stages) - 1)

    def action_next_block(self) -> None:
        self.go_to(block_jump(self.stages, self.index, +1, self.trace.n_layer))

    def action_previous_block(self) -> None:
        self.go_to(block_jump(self.stages, self.index, -1, self.trace.n_layer))

    def action_next_head(self) -> None:
        self.set_head(self.head + 1)

    def action_previous_head(self) -> None:
        self.set_head(self.head - 1)

    def action_all_heads(self) -> None:
        stage = self.stage
        if stage.layer is None:
            self.notify(
                _("All heads: go to a block first ({key} jumps to block 0).").format(key=key_name(self, "next_block")),
                timeout=3,
            )
            return
        kind = "pattern" if stage.kind == "heads" else "heads"
        self.go_to(index_of(self.stages, kind, stage.layer))

    def _cannot_switch(self, undoing: bool = False) -> bool:
        """Says why switching parts off (or `undoing` it) cannot run here, where it cannot (True):
        a step opened from the generation view, a replay without a model, nothing switched off."""
        if not self.is_main:
            self.notify(
                _("Switching parts off works on the prompt's own pass, not on a step opened from the generation view: "
                  "{back} goes back.").format(back=key_name(self, "back")),
                timeout=4,
            )
        elif not self.session.live:
            self.notify(_("Switching parts off needs a model: start gpt2viz with --model."), severity="warning", timeout=3)
        elif undoing and not self.session.ablations:
            self.notify(_("Nothing is switched off in this pass: {key} switches a part off.").format(
                key=key_name(self, "what_if")), timeout=3)
        else:
            return False
        return True

    def action_what_if(self) -> None:
        """Offers the parts of the model this stage can switch off; the session runs the pass again."""
        if self._cannot_switch():
            return
        if self.stage.layer is None:
            self.notify(
                _("Switching parts off: go to a block of the prompt's pass first ({key} jumps to block 0).").format(
                    key=key_name(self, "next_block")
                ),
                timeout=3,
            )
            return
        from .interventions import InterventionMenu

        def chosen(ablation) -> None:
            if ablation is not None:
                self.session.switch_off(ablation)

        self.app.push_screen(InterventionMenu(self.trace, self.stage, self.head), chosen)

    def action_undo_intervention(self) -> None:
        if not self._cannot_switch(undoing=True):
            self.session.undo_switch_off()

    def action_clear_interventions(self) -> None:
        if not self._cannot_switch(undoing=True):
            self.session.clear_switched_off()

    def action_edit_prompt(self) -> None:
        """Edits the prompt; the session runs the model on the new one."""
        if not self.session.live:
            source = self.session.replay_name(_("a saved trace"))
            self.notify(
                _(
                    "This is a replay of {source}: there is no model to run a new prompt. "
                    "Start gpt2viz with --model to edit prompts."
                ).format(source=source),
                title=_("Editing needs a model"),
                severity="warning",
                markup=False,
            )
            return
        from .prompt import PromptScreen

        def edited(prompt: str | None) -> None:
            if prompt is not None:
                self.session.run(prompt)

        self.app.push_screen(PromptScreen(self.session.prompt), edited)

    def action_show_map(self) -> None:
        """Shows the map of the model with the stage on screen highlighted."""
        from .model_map import ModelMapScreen

        self.app.push_screen(ModelMapScreen(self.trace, self.stage))

    def action_generate(self) -> None:
        """Opens the generation view: back to the one this step was opened from, or a new one."""
        if not self.is_main:
            self.close()
            return
        from .generation import open_generation

        open_generation(self)

    def action_cost_lab(self) -> None:
        """Opens the cost lab on the model (or on the replayed trace's recorded result)."""
        from .cost_lab import CostLabScreen

        self.app.push_screen(CostLabScreen(self.session, self.trace))

    def action_attribution(self) -> None:
        """Which parts wrote the answer, for the pass on show (a replay says it needs a model)."""
        from .attribution import open_attribution

        open_attribution(self)

    def action_scroll_up(self) -> None:
        self.query_one(StageView).scroll_up(animate=False, immediate=True)

    def action_scroll_down(self) -> None:
        self.query_one(StageView).scroll_down(animate=False, immediate=True)

    def action_page_up(self) -> None:
        view = self.query_one(StageView)
        view.scroll_to(y=view.scroll_y - view.scrollable_content_region.height, animate=False, immediate=True)

    def action_page_down(self) -> None:
        view = self.query_one(StageView)
        view.scroll_to(y=view.scroll_y + view.scrollable_content_region.height, animate=False, immediate=True)

    def action_back(self) -> None:
        self.close()
