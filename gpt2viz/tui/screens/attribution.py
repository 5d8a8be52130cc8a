"""Which parts wrote the answer: direct logit attribution of the final token, activation patching
between this pass's prompt and a corrupted one of the same token length, and the heads that do a
known job (previous token, duplicate token, induction; the attention sink of this pass).

Both run in the session's model thread (`Session.attribute`, `Session.patch`: jobs this screen
owns) and hand over plain results (an `Attribution`, a `PatchingResult` with the token texts it is
read with); the screen only draws, so no torch work runs on the UI thread. A replay has no model to
run: `w` says so in one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, Horizontal, Vertical, VerticalScroll
from textual.widgets import Input, ProgressBar, Static, TabbedContent, TabPane

from ...attribution import Attribution
from ...i18n import N_, _, count, ngettext, say
from ...trace import Trace
from ..attribution_narration import (
    HEAD_JOBS,
    candidates,
    default_corruption,
    dla_text,
    dla_title,
    grid_columns,
    grid_scale,
    grid_values,
    heads_grid_title,
    heads_text,
    patch_idle_text,
    patch_text,
    strongest,
    sink_shares,
    term_lines,
    tokens_text,
)
from ..facts import key_texts
from ..formatting import parts_off, quote
from ..language import key_name
from ..widgets.contribution_grid import ContributionGrid, GridData
from ..widgets.heatmap import Heatmap, HeatmapData
from ..session import PatchRun, SameAnswer
from ..widgets.safe_input import FieldInput
from ..widgets.strip_widget import Prose
from ..widgets.top_bar import TopBar
from ..widgets.footer import AppFooter
from .base import AppScreen

TABS = ("dla", "patch", "heads")
# The tab keys, together in the footer: "1 2 tab".
TAB_KEYS = Binding.Group(N_("tab"))
TITLES = {"dla": N_("Direct logit attribution"), "patch": N_("Activation patching"), "heads": N_("Heads at work")}

HELP = N_(
    "Which parts wrote the answer. Direct logit attribution splits the logit of the final token into one "
    "term per part of the network (the embeddings, every head, every MLP, the biases), each part's output "
    "read through the final LayerNorm with its scale frozen and the token's row of wte; the terms add up "
    "to the logit. {token} attributes the next of the model's top candidates. Activation patching runs a "
    "corrupted prompt of the same token length with the clean prompt's residual stream put back at one "
    "block and position at a time, and shows how much of the clean answer's lead each patch brings back. "
    "Type the corrupted prompt in the box and press {enter} ({patch} outside the box); {stop} stops a run. "
    "Heads at work scores every head at three jobs on a random sequence repeated once (induction, previous "
    "token, duplicate token) and shows this pass's attention sink; {job} shows the next grid. "
    "Heatmaps: blue to orange for signed values."
)


# The same help for a LLaMA-family model, whose parts are other ones (no biases, no position table, RMSNorm).
HELP_LLAMA = N_(
    "Which parts wrote the answer. Direct logit attribution splits the logit of the final token into one "
    "term per part of the network (the token embedding, every head, every MLP: this model has no biases and "
    "no position table), each part's output read through the final RMSNorm with its scale frozen and the "
    "LM head's row for the token; the terms add up to the logit. {token} attributes the next of the model's "
    "top candidates. Activation patching runs a corrupted prompt of the same token length with the clean "
    "prompt's residual stream put back at one block and position at a time, and shows how much of the clean "
    "answer's lead each patch brings back. Type the corrupted prompt in the box and press {enter} ({patch} "
    "outside the box); {stop} stops a run. Heads at work scores every head at three jobs on a random "
    "sequence repeated once (induction, previous token, duplicate token) and shows this pass's attention "
    "sink; {job} shows the next grid. The arrows and page keys scroll the tab. Heatmaps: blue to orange for "
    "signed values."
)


def open_attribution(screen) -> None:
    """Opens the screen on the pass `screen` shows (the step-through or the generation view); a
    replay, which has no model to run, says so in one line."""
    if not screen.session.live:
        screen.notify(
            _("Which parts wrote the answer needs a model to run: start gpt2viz with --model."),
            severity="warning",
            markup=False,
        )
        return
    screen.app.push_screen(AttributionScreen(screen.session, screen.trace))


@dataclass
class AttributionKept:
    """What the screen worked out for `trace`, kept on the session when it leaves and shown again
    when it opens on the same trace: escape no longer throws a patching run away."""

    trace: Trace
    attributions: list[Attribution | None]
    patch: PatchRun | None
    corrupted: str  # the corrupted prompt as typed
    head_scores: Any  # gpt2viz.head_detector.HeadScores, or None


class AttributionScreen(AppScreen[None]):
    """Two tabs over one pass of the session's model: the attribution of its final token, and patching."""

    BINDINGS = [
        Binding("t", "next_token", N_("next candidate"), id="attribution-token",
                tooltip=N_("Attribute the model's next candidate token")),
        Binding("r", "patch", N_("patch"), id="attribution-patch",
                tooltip=N_("Patch the clean run into the corrupted prompt's")),
        Binding("space", "stop", N_("stop"), id="attribution-stop", tooltip=N_("Stop the patching run"),
                key_display="␣"),
        Binding("1", "show('dla')", N_("attribution"), id="attribution-dla",
                tooltip=N_("Direct logit attribution of the final token"), group=TAB_KEYS),
        Binding("2", "show('patch')", N_("patching"), id="attribution-patching",
                tooltip=N_("Activation patching between two prompts"), group=TAB_KEYS),
        Binding("3", "show('heads')", N_("heads"), id="attribution-heads",
                tooltip=N_("The heads that do a known job: induction, previous token, duplicate token"), group=TAB_KEYS),
        Binding("j", "next_job", N_("next grid"), id="attribution-next-job",
                tooltip=N_("Show the scores of the next job")),
        Binding("escape", "back", N_("back"), id="attribution-back", tooltip=N_("Back to where this was opened")),
        # The tab on show scrolls from the keyboard (its grid is taller than 24 lines on a 30-block
        # model), whatever has the focus: the tab bar, the grid, or nothing.
        Binding("down", "scroll('down')", N_("scroll"), id="attribution-scroll-down", show=False,
                tooltip=N_("Scroll the tab down")),
        Binding("up", "scroll('up')", N_("scroll"), id="attribution-scroll-up", show=False, tooltip=N_("Scroll the tab up")),
        Binding("pagedown", "scroll('page_down')", N_("page down"), id="attribution-page-down", show=False,
                tooltip=N_("Scroll the tab a page down")),
        Binding("pageup", "scroll('page_up')", N_("page up"), id="attribution-page-up", show=False,
                tooltip=N_("Scroll the tab a page up")),
        Binding("end", "scroll('end')", N_("end"), id="attribution-end", show=False, tooltip=N_("Scroll to the tab's end")),
        Binding("home", "scroll('home')", N_("start"), id="attribution-home", show=False,
                tooltip=N_("Scroll to the tab's start")),
    ]

    # A screen's CSS applies to the whole app once loaded: every selector names this screen's own ids and classes.
    CSS = """
    #attr-tabs { height: 1fr; }
    #attr-tabs TabPane { padding: 0; }
    .attr-pane { height: 1fr; padding: 0 1; }
    .attr-picture, .attr-words { height: auto; }
    .attr-words { margin-top: 1; }
    /* Side by side where there is room: the picture left (wide enough for GPT-2 small's 12 heads
       with their values printed), the words right. */
    .-roomy .attr-pane, .-wide .attr-pane { layout: horizontal; }
    .-roomy .attr-picture, .-wide .attr-picture { width: 3fr; }
    .-roomy .attr-words, .-wide .attr-words { width: 2fr; margin-top: 0; padding-left: 2; }
    #dla-title { text-style: bold; margin-bottom: 1; }
    #dla-terms { margin-top: 1; }
    #patch-row { height: 1; padding: 0 1; }
    #patch-label { width: auto; color: $text-muted; padding-right: 1; }
    #patch-input { width: 1fr; }
    #patch-message { height: auto; padding: 0 1; color: $warning; }
    #attr-status { height: 1; layout: horizontal; background: $panel; padding: 0 1; }
    #attr-status-text { width: 1fr; }
    #attr-progress { width: 30; }
    """

    def help_text(self) -> str:
        """How to read the screen, in the current language, naming the keys as they are bound now."""
        help_text = HELP_LLAMA if self.trace.architecture == "llama" else HELP
        return _(help_text).format(
            token=key_name(self, "next_token"), patch=key_name(self, "patch"), stop=key_name(self, "stop"), enter=self._enter,
            job=key_name(self, "next_job"),
        )

    def __init__(self, session, trace: Trace) -> None:
        super().__init__(session)
        self.trace = trace
        self.lm = session.lm
        self.replay = session.replay_path
        self.ids = trace.all_token_ids
        self.tokens = key_texts(trace)  # display text of every position
        self.candidates = candidates(trace)
        self.attributions: list[Attribution | None] = [None] * len(self.candidates)
        self.choice = 0  # the candidate on show
        self.patch: PatchRun | None = None
        # Why the last patching did not run, in the current language when called.
        self.refusal: Callable[[], str] | None = None
        self.running = False
        self.stopped = False  # the last run was stopped before it finished
        self.progress: tuple[int, int] | None = None  # patched runs done and to do, once known
        self.head_scores = None  # gpt2viz.head_detector.HeadScores, once the detector has run
        self.detecting = False  # the detector's job is under way (it runs once a screen)
        self.job = 0  # the grid on show in the heads tab (HEAD_JOBS)
        self.failure: str | None = None  # why the attribution could not run, if it could not
        self.corrupted = default_corruption(trace.prompt, self.lm.encode_prompt)
        # The parts switched off in the pass on show (what if): every run of this screen keeps them off,
        # so that what it splits and patches is that pass's.
        self.ablations = trace.ablations
        kept = session.attribution_kept
        if isinstance(kept, AttributionKept) and kept.trace is trace:  # opened before on this pass
            self.attributions, self.patch, self.head_scores = list(kept.attributions), kept.patch, kept.head_scores
            self.corrupted = kept.corrupted

    def compose(self) -> ComposeResult:
        yield TopBar(id="top-bar")
        with TabbedContent(id="attr-tabs", initial="attr-dla"):
            with TabPane(_(TITLES["dla"]), id="attr-dla"):
                with VerticalScroll(id="dla-pane", classes="attr-pane"):
                    with Vertical(classes="attr-picture"):
                        yield Static(id="dla-title", markup=False)  # it quotes a token
                        yield ContributionGrid(id="dla-grid")
                        yield Prose(id="dla-terms")
                    yield Prose(id="dla-words", classes="attr-words")
            with TabPane(_(TITLES["patch"]), id="attr-patch"):
                with Horizontal(id="patch-row"):
                    yield Static(id="patch-label")
                    yield FieldInput(self.corrupted, id="patch-input", compact=True)
                yield Static(id="patch-message", markup=False)
                with VerticalScroll(id="patch-pane", classes="attr-pane"):
                    with Vertical(classes="attr-picture"):
                        yield Heatmap(id="patch-map")
                    yield Prose(id="patch-words", classes="attr-words")
            with TabPane(_(TITLES["heads"]), id="attr-heads"):
                with VerticalScroll(id="heads-pane", classes="attr-pane"):
                    with Vertical(classes="attr-picture"):
                        yield Static(id="heads-title", markup=False)
                        yield ContributionGrid(id="heads-grid")
                    yield Prose(id="heads-words", classes="attr-words")
        with Container(id="attr-status"):
            yield Static(id="attr-status-text", markup=False)
            yield ProgressBar(id="attr-progress", show_eta=False)
        yield AppFooter()

    def on_mount(self) -> None:
        self.redraw_language()
        if self.candidates and any(a is None for a in self.attributions):
            self.session.attribute(
                self, self.ids, [c.token_id for c in self.candidates], on_each=self._attributed, on_error=self._failed,
                ablations=self.ablations,
            )

    def redraw_language(self) -> None:
        """Every text in the current language, from the results held (nothing runs again)."""
        tabs = self.query_one(TabbedContent)
        for name in TABS:
            tabs.get_tab(f"attr-{name}").label = _(TITLES[name])
        self.query_one(TopBar).draw(self.trace, self.replay, checked=self.session.verification)
        self.query_one("#patch-label", Static).update(_("Corrupted prompt:"))
        self.query_one(Input).placeholder = _("the clean prompt with a word changed")
        self._draw_dla()
        self._draw_patch()
        self._draw_heads()
        self._status()

    @property
    def shown(self) -> str:
        return (self.query_one(TabbedContent).active or "attr-dla").removeprefix("attr-")

    @property
    def _enter(self) -> str:
        return self.app.get_key_display(Binding("enter", ""))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "next_token":
            return self.shown == "dla" and len(self.candidates) > 1
        if action == "patch":
            return self.shown == "patch" and not self.running
        if action == "stop":
            return self.running
        if action == "next_job":
            return self.shown == "heads"
        return True

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        if self.shown == "heads" and self.head_scores is None and not self.detecting:  # by key, click or tab
            self.detecting = True
            self.session.detect_heads(self, on_result=self._detected, on_error=self._failed, ablations=self.ablations)
        self.refresh_bindings()
        self._status()

    def action_scroll(self, where: str) -> None:
        pane = self.query_one(f"#{self.shown}-pane", VerticalScroll)
        {"down": pane.scroll_down, "up": pane.scroll_up, "page_down": pane.scroll_page_down,
         "page_up": pane.scroll_page_up, "end": pane.scroll_end, "home": pane.scroll_home}[where](animate=False)

    def action_next_job(self) -> None:
        self.job = (self.job + 1) % len(HEAD_JOBS)
        self._draw_heads()

    # -- actions -----------------------------------------------------------------------------
    def action_show(self, name: str) -> None:
        self.query_one(TabbedContent).active = f"attr-{name}"  # the heads tab: its activation runs the detector
        if name == "patch" and not self.running:
            self.query_one(Input).focus()  # typing the corrupted prompt comes first

    def verified(self) -> None:
        """The check against transformers ended: the top bar says how it went."""
        self.query_one(TopBar).draw(self.trace, self.replay, checked=self.session.verification)

    def action_back(self) -> None:
        self.session.jobs.cancel(self)
        self._keep()
        self.close()

    def _keep(self) -> None:
        """What this screen has worked out, for the next time it opens on this trace (a run still
        going is cancelled: its result is not kept)."""
        self.session.attribution_kept = AttributionKept(
            self.trace, list(self.attributions), self.patch, self.query_one(Input).value, self.head_scores
        )

    def action_next_token(self) -> None:
        self.choice = (self.choice + 1) % len(self.candidates)
        self._draw_dla()
        self._status()
        self.query_one("#dla-pane", VerticalScroll).scroll_home(animate=False)  # the new token's title and block 0

    def on_descendant_focus(self, event) -> None:
        self._status()  # the patching tab's line says what the keys do in and out of the box

    def on_descendant_blur(self, event) -> None:
        self._status()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if not self.running:
            self.action_patch()

    def on_input_changed(self, event: Input.Changed) -> None:
        """A refusal on show is checked again as the corrupted prompt is typed: it goes once the
        prompt would run (a crash walk read 'The corrupted prompt has 2 tokens' under a prompt of
        the right length, until enter)."""
        if self.refusal is not None and not self.running and self._refusal_of(event.value)[1] is None:
            self.refusal = None
            self._draw_patch()
            self._status()

    def _refusal_of(self, text: str) -> tuple[list[int], Callable[[], str] | None]:
        """The corrupted prompt's ids, and why patching cannot run on them (None: it can)."""
        corrupted = self.lm.encode_prompt(text) if text.strip() else []
        clean = self.ids
        if not corrupted:
            return corrupted, lambda: _("Type a corrupted prompt first: the clean prompt with a word changed.")
        if len(corrupted) != len(clean):
            return corrupted, lambda: _(
                "The corrupted prompt has {corrupted} and the clean one {clean}: patching needs the same "
                "number of tokens."
            ).format(corrupted=tokens_text(len(corrupted)), clean=tokens_text(len(clean)))
        if corrupted == clean:
            return corrupted, lambda: _("The corrupted prompt is the clean one: change a word the answer depends on.")
        return corrupted, None

    def action_patch(self) -> None:
        """Checks the corrupted prompt here (tokenizing is cheap) and patches in a worker."""
        corrupted, refusal = self._refusal_of(self.query_one(Input).value)
        if refusal is not None:
            self._refuse(refusal)
        else:
            self.refusal, self.patch, self.stopped = None, None, False
            self.running, self.progress = True, None
            self.query_one(ProgressBar).update(total=None, progress=0)
            self.query_one("#patch-pane").focus()  # out of the box: keys act on the screen again (␣ stops)
            self.refresh_bindings()
            self._draw_patch()
            self._status()
            self.session.patch(
                self, self.ids, corrupted, on_progress=self._progressed, on_result=self._patched, on_error=self._failed,
                ablations=self.ablations,
            )

    def _refuse(self, why: Callable[[], str]) -> None:
        # The grid of an earlier run goes too: under a refusal it would read as the new prompt's.
        self.refusal, self.patch, self.stopped = why, None, False
        self._draw_patch()
        self._status()

    def action_stop(self) -> None:
        """The patching run ends before its next patched pass."""
        self.session.jobs.stop(self, "patch")

    # -- what the model thread hands over ---------------------------------------------------------
    def _attributed(self, index: int, attribution: Attribution) -> None:
        self.attributions[index] = attribution
        if index == self.choice:
            self._draw_dla()
            self._status()

    def _progressed(self, done: int, total: int) -> None:
        self.progress = (done, total)
        self.query_one(ProgressBar).update(total=total, progress=done)
        self._status()

    def _patched(self, patch: PatchRun | SameAnswer | None) -> None:
        if isinstance(patch, SameAnswer):
            token = quote(patch.token)
            self.refusal = lambda: _(
                "Both prompts make the model predict {token}: there is no difference to restore. Change a word "
                "the answer depends on."
            ).format(token=token)
        else:
            self.patch = patch
            self.stopped = patch is None
        if self.shown == "patch":
            # Back in the box, as the status line asks (the run had left it for ␣ to stop it): the
            # next thing to do is change the prompt, and no key typed for the box acts on the screen.
            self.query_one(Input).focus()
        self._ended()

    def _detected(self, scores) -> None:
        self.head_scores, self.detecting = scores, False
        self._draw_heads()
        self._status()

    def _failed(self, text: str, code: int) -> None:
        self.notify(text, title=_("The run failed"), severity="error", markup=False)
        self.failure, self.detecting = text, False
        if self.running:
            self._ended()
        self._status()

    def _ended(self) -> None:
        self.running = False
        self.refresh_bindings()
        self._draw_patch()
        self._status()

    # -- drawing -------------------------------------------------------------------------------
    def _status(self) -> None:
        bar = self.query_one(ProgressBar)
        bar.display = self.running
        stop = key_name(self, "stop")
        if self.running and self.progress is None:
            text = _("Patching: running both prompts ({stop} stops)").format(stop=stop)
        elif self.running:
            done, total = self.progress
            text = ngettext(
                "Patching: {done} of {total} patched run ({stop} stops)",
                "Patching: {done} of {total} patched runs ({stop} stops)",
                total,
            ).format(done=count(done), total=count(total), stop=stop)
        elif self.shown == "patch" and not self.query_one(Input).has_focus:
            text = _("{patch} runs the corrupted prompt; {box} goes back to the box to change it.").format(
                patch=key_name(self, "patch"), box=key_name(self, "show('patch')"))
        elif self.shown == "patch":
            if self.stopped:
                text = _("Patching stopped before it finished: {enter} in the box runs it again.").format(enter=self._enter)
            else:
                text = _("Type a corrupted prompt in the box and press {enter}.").format(enter=self._enter)
        elif self.shown == "heads":
            text = "" if self.head_scores is not None or self.failure else _("Scoring every head on a repeated random sequence…")
        elif not self.candidates:
            text = ""
        elif self.attributions[self.choice] is None and self.failure:
            text = self.failure
        elif self.attributions[self.choice] is None:
            text = _("Attributing {token}…").format(token=quote(self.candidates[self.choice].text))
        elif len(self.candidates) > 1:
            text = _("{key} attributes the model's next candidate token.").format(key=key_name(self, "next_token"))
        else:
            text = ""
        self.query_one("#attr-status-text", Static).update(text)

    def _draw_dla(self) -> None:
        title = self.query_one("#dla-title", Static)
        grid = self.query_one(ContributionGrid)
        terms = self.query_one("#dla-terms", Prose)
        words = self.query_one("#dla-words", Prose)
        a = self.attributions[self.choice] if self.candidates else None
        if a is None:
            title.update("" if self.candidates else _("This pass recorded no top tokens to attribute."))
            grid.show(None)
            terms.update("")
            words.update("")
            return
        candidate, n = self.candidates[self.choice], len(self.candidates)
        title.update(dla_title(a, candidate, self.choice + 1, n))
        grid.show(
            GridData(
                values=grid_values(a),
                row_labels=[_("block {layer}").format(layer=layer) for layer in range(len(a.heads))],
                col_labels=grid_columns(len(a.heads[0]), a.architecture != "llama"),
                rule_before=len(a.heads[0]),
                scale=grid_scale(a),
                corner=_("head"),
            )
        )
        terms.update(term_lines(a))
        last = len(self.ids) - 1
        dtype = str(self.trace.model.get("dtype", ""))
        words.update(self._edited(dla_text(a, candidate, self.choice + 1, n, self.tokens[last], last, dtype,
                                           key_name(self, "next_token"))))

    def _edited(self, text: str, key: str = "attribution.edited") -> str:
        """`text` after the paragraph that says this pass is edited, where it is (what-if)."""
        if not self.ablations:
            return text
        return say(key, parts=parts_off(a.spec for a in self.ablations)) + "\n\n" + text

    def _draw_heads(self) -> None:
        title = self.query_one("#heads-title", Static)
        grid = self.query_one("#heads-grid", ContributionGrid)
        words = self.query_one("#heads-words", Prose)
        scores = self.head_scores
        if scores is None:
            title.update("")
            grid.show(None)
            words.update("")
            return
        job = HEAD_JOBS[self.job]
        values = sink_shares(self.trace) if job == "sink" else scores.scores[job].tolist()
        n_head = len(values[0])
        title.update(heads_grid_title(job, scores))
        grid.show(
            GridData(
                values=values,
                row_labels=[_("block {layer}").format(layer=layer) for layer in range(len(values))],
                col_labels=[str(h) for h in range(n_head)],
                rule_before=n_head,
                scale=1.0 if job == "sink" else scores.best[job],
                corner=_("head"),
            )
        )
        words.update(self._edited(heads_text(scores, self.trace, self.tokens, key_name(self, "next_job")),
                                  "attribution.edited_heads"))

    def _draw_patch(self) -> None:
        message = self.query_one("#patch-message", Static)
        message.update(self.refusal() if self.refusal else "")
        message.display = self.refusal is not None
        heatmap = self.query_one(Heatmap)
        words = self.query_one("#patch-words", Prose)
        if self.patch is None:
            heatmap.show(None)
            if self.running:
                words.update("")
            else:
                words.update(patch_idle_text(self.trace.prompt, len(self.ids), self._enter))
            return
        result = self.patch.result
        block, _position = strongest(result.restored)
        heatmap.show(
            HeatmapData(
                values=result.restored,
                row_labels=[],
                col_labels=self.tokens,
                signed=True,
                scale=1.0,
                highlight_row=block,
                pool_rows=False,
                caption=_("Rows: the block the patch enters. Columns: positions. 1: the clean answer's lead restored."),
            )
        )
        words.update(self._edited(patch_text(result, self.ids, self.patch.corrupted_ids, self.tokens, self.patch.answers)))
