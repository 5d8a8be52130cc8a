"""The parts of the generation view: the text, the chosen step, the cost, the KV cache.

Each draws itself from one ViewState (plain data: the run's facts, the generation's step records,
a comparison if one was run, the selected step), so a live run and a replayed trace look alike.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rich.cells import cell_len
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from ...i18n import N_, _, ngettext
from ...text_safety import token_label
from ..formatting import clip, compact_shape, count, fit, nbytes, num, percent, prose, prose_line, running_texts, shape
from ..generation import Comparison, Generation
from ..table_layout import wrapped
from ..generation_narration import (
    bandwidth_text,
    busy_share,
    choice_text,
    compare_text,
    kv_formula,
    kv_text,
    step_flow,
    step_heading,
    step_text,
    stop_text,
)
from ..facts import RunFacts
from ..language import key_name
from ..styled_text import laid_lines, styled
from .latency_chart import LatencyChart, Series
from .pictures import CHIP_A, CHIP_B, CURRENT, NEW, bar
from .laid import Laid
from .strip_widget import Prose

PROMPT_CHIP_A = "$foreground 60% on $primary 15%"
PROMPT_CHIP_B = "$foreground 60% on $secondary 15%"
TOKEN_WIDTH = 14


@dataclass
class ViewState:
    """Everything the generation view draws from."""

    facts: RunFacts
    gen: Generation
    comparison: Comparison | None = None
    selected: int | None = None  # None: follow the newest step
    running: bool = False

    @property
    def index(self) -> int | None:
        """The step on show: the selected one, else the newest (None before the first)."""
        if not self.gen.steps:
            return None
        if self.selected is None:
            return len(self.gen.steps) - 1
        return max(0, min(self.selected, len(self.gen.steps) - 1))


def lines(rows: list[Content]) -> Content:
    return Content("\n").join(rows)


def label(text: str, width: int) -> str:
    """A row label in a column of `width` cells, with at least one space after it."""
    return fit(text, width - 1) + " "


class GeneratedText(Static):
    """The prompt, dimmed, and the generated tokens after it; token boundaries on request.

    Lives in a TextPanel, whose component classes style it.
    """

    selected_line = 0  # the line the selected step's token starts on, as last drawn

    def draw(self, state: ViewState, boundaries: bool) -> None:
        """Shows the text of `state`, the step on show highlighted when one is selected."""
        parts: list[tuple[str, str] | str] = []
        prompt = state.gen.prompt_tokens
        # Running text puts a character that tokens share together (prompt and steps alike).
        pieces = [] if boundaries else running_texts(prompt + [step["text"] for step in state.gen.steps],
                                                     final=not state.running)
        for i, text in enumerate(prompt):
            if boundaries:
                parts += [(token_label(text), PROMPT_CHIP_A if i % 2 == 0 else PROMPT_CHIP_B), " "]
            else:
                parts.append((prose(pieces[i]), ".gen-panel--prompt"))
        if not boundaries:
            parts.append(("│", ".gen-panel--dim"))
        chosen = state.selected
        completing = False  # running text: the chosen token began a character a later one completes
        for i, step in enumerate(state.gen.steps):
            text = step["text"]
            shown = token_label(text) if boundaries else prose(pieces[len(prompt) + i])
            if i == chosen:
                style = CURRENT
                width = self.content_size.width
                # Where it starts once wrapped as the widget wraps it: its panel scrolls it into sight.
                self.selected_line = len(Content.assemble(*parts).wrap(width)) - 1 if width > 0 else 0
                completing = not shown
            elif completing:  # the character the chosen token is part of, lit with it
                style = CURRENT
                completing = not shown
            elif boundaries:
                style = CHIP_A if i % 2 == 0 else CHIP_B
            else:
                style = ".gen-panel--new"
            parts.append((shown, style))
            if boundaries:
                parts.append(" ")
        if state.running:
            parts.append(("▌", ".gen-panel--cursor"))
        self.update(Content.assemble(*parts))


SHAPE = re.compile(r"\[[0-9][0-9, ]*\]")  # a shape in a line of text: '[1, 8, 44, 14]'


def legend_lines(entries: list[tuple[str, str, str]], room: int) -> Content:
    """A legend's entries (mark, its style, words) side by side, or one a line where they do not
    fit side by side: a mark is never parted from its words."""
    items = [Content.assemble((mark, style), " " + words) for mark, style, words in entries]
    joined = Content("   ").join(items)
    return joined if joined.cell_length <= room else Content("\n").join(items)


class Panel(VerticalScroll, inherit_bindings=False):
    """A titled column of the generation view (its title is the border title).

    It scrolls up and down only: left and right stay free for moving between steps.
    """

    BINDINGS = [
        Binding("up", "scroll_up", N_("scroll up"), show=False),
        Binding("down", "scroll_down", N_("scroll down"), show=False),
        Binding("pageup", "page_up", N_("page up"), show=False),
        Binding("pagedown", "page_down", N_("page down"), show=False),
    ]

    COMPONENT_CLASSES = {
        "gen-panel--title",
        "gen-panel--dim",
        "gen-panel--token",
        "gen-panel--shape",
        "gen-panel--good",
        "gen-panel--bad",
        "gen-panel--bar",
        "gen-panel--prompt",
        "gen-panel--new",
        "gen-panel--cursor",
        "gen-panel--first",
        "gen-panel--decode",
        "gen-panel--naive",
        "gen-panel--cached",
    }

    _focus_key = "tab"  # the key that focuses the next panel, as bound when last drawn

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        self.show_more_hint()

    def on_resize(self) -> None:
        # Sent for a new size and for a new height of the content (the panel's virtual size).
        self.show_more_hint()

    def on_focus(self) -> None:
        self.show_more_hint()

    def on_blur(self) -> None:
        self.show_more_hint()

    def name_keys(self) -> None:
        """Keeps the names of the keys the hints quote, as bound now, and says the hint again in the
        language of the moment (called when drawn; a new height of the content calls it again)."""
        self._focus_key = key_name(self, "focus_next")
        self.show_more_hint()

    def show_more_hint(self) -> None:
        """Says in the bottom border when part of the panel is out of sight below (from the
        panel's own scroll state: it may run for a panel whose screen has gone)."""
        more = self.max_scroll_y > 0 and self.scroll_y < self.max_scroll_y
        if not more:
            self.border_subtitle = ""
        elif self.has_focus:
            self.border_subtitle = _("↓ more")
        else:  # how to get there: focus the panel first
            self.border_subtitle = _("{key} ↓ more").format(key=self._focus_key)


def room_of(width: int) -> int:
    """Cells a panel's table lays its lines out in (its width, at least 24)."""
    return max(24, width)


class TextPanel(Panel):
    """The text so far, following its end while tokens arrive."""

    following = True  # whether the text's end is kept in sight (no step of it selected)

    def show_more_hint(self) -> None:
        """The text panel's bottom border names the boundaries key instead (it follows the text's end)."""

    def on_resize(self) -> None:
        # Sent for a new size and for a new height of the text: its end comes into sight.
        if self.following:
            self.scroll_end(animate=False, immediate=True)

    def compose(self) -> ComposeResult:
        yield GeneratedText(id="gen-text")

    def draw(self, state: ViewState, boundaries: bool) -> None:
        """Shows the text and keeps its end (or the step on show) in sight."""
        # With little room the prompt scrolls out of sight: the title keeps it.
        # Content, not a str: Textual reads a str border title as markup, and the prompt is the user's.
        self.border_title = Content(_('Text · prompt "{prompt}"').format(prompt=clip(prose_line(state.gen.prompt_tokens), 40)))
        self.border_subtitle = _("{key}: token boundaries").format(key=key_name(self, "boundaries"))
        self.query_one(GeneratedText).draw(state, boundaries)
        self.following = state.selected is None
        # The text's new height is known once it is laid out (a Resize was not always sent for it:
        # a 200-token run stayed at its first lines): its end, or the selected step, comes into sight then.
        self.call_after_refresh(self._keep_in_sight)

    def _keep_in_sight(self) -> None:
        if not self.is_attached:
            return
        if self.following:
            self.scroll_end(animate=False, immediate=True)
            return
        line, height = self.query_one(GeneratedText).selected_line, self.scrollable_content_region.height
        if height > 0 and not self.scroll_y <= line < self.scroll_y + height:
            self.scroll_to(y=max(0, line - height // 2), animate=False, immediate=True)


class ChoicePanel(Panel):
    """The step on show: its top candidates before and after the settings, its shapes, its words."""

    def compose(self) -> ComposeResult:
        yield Laid(id="choice-table")
        yield Prose(id="choice-text")
        yield Laid(id="choice-flow")
        yield Prose(id="choice-step-text")

    def draw(self, state: ViewState) -> None:
        """Shows the choice of the step on show."""
        self.name_keys()
        gen, i = state.gen, state.index
        if i is None:
            self.border_title = _("Next token")
            self.query_one("#choice-table", Laid).show(Content.styled(_("No token yet."), ".gen-panel--dim"))
            self.query_one("#choice-flow", Laid).show(None)
            for name in ("#choice-text", "#choice-step-text"):
                self.query_one(name, Prose).update("")
            return
        self.border_title = step_heading(gen, i)
        self.query_one("#choice-table", Laid).show(lambda width: self._table(gen, i, room_of(width)))
        self.query_one("#choice-text", Prose).update(choice_text(gen, i))
        flow_lines = step_flow(state.facts, gen, i)

        def flow(width: int) -> Content:
            parts = [part for line in flow_lines for part in wrapped(Content(line), room_of(width), 2, keep=SHAPE)]
            return lines(parts).highlight_regex(SHAPE, style=".gen-panel--shape")

        self.query_one("#choice-flow", Laid).show(flow)
        self.query_one("#choice-step-text", Prose).update(step_text(state.facts, gen, i))

    def _table(self, gen: Generation, i: int, room: int) -> Content:
        step = gen.steps[i]
        raw = step.get("raw") or {"ids": [], "tokens": [], "probs": []}
        cand = step.get("candidates") or {"ids": [], "tokens": [], "probs": []}
        greedy = gen.settings.sampling.greedy
        width = max(6, min(TOKEN_WIDTH, room - (23 if not greedy else 22)))
        rows = [
            styled(
                _("chose {token}  id {id}  p {p}"),
                ".gen-panel--dim",
                token=(token_label(step["text"]), NEW),
                id=str(step["id"]),
                p=percent(step.get("chosen_prob")),
            )
        ]
        token = fit(_("token"), width)
        if greedy:
            softmax = fit(_("softmax"), 7, "right")
            rows.append(Content.styled(f"   {token} {softmax}", ".gen-panel--dim"))
        else:
            plain, sampled = fit(_("plain"), 7, "right"), fit(_("sampled"), 7, "right")
            rows.append(Content.styled(f"   {token} {plain}   {sampled}", ".gen-panel--dim"))
        after = dict(zip(cand["ids"], cand["probs"]))
        complete = len(cand["ids"]) < len(raw["ids"])  # every token left after top-k/top-p is listed
        entries = list(zip(raw["ids"], raw["tokens"], raw["probs"]))
        if step["id"] not in raw["ids"]:
            entries.append((step["id"], step["text"], None))
        top = (raw["probs"][0] if raw["probs"] else None) or 1.0
        for r, (tid, tok, p) in enumerate(entries, 1):
            is_chosen = tid == step["id"]
            mark = " ◀" if is_chosen else ""
            rank = f"{r:>2} " if p is not None else " … "
            style = NEW if is_chosen else ".gen-panel--token"
            if greedy:
                rows.append(
                    Content.assemble(
                        (rank, ".gen-panel--dim"),
                        (fit(token_label(tok), width), style),
                        f" {percent(p):>7} ",
                        (bar((p or 0) / top, max(4, room - width - 15)), ".gen-panel--bar"),
                        mark,
                    )
                )
            else:
                q = after.get(tid)
                q_text = percent(q) if q is not None else ("0%" if complete or p is None else "–")
                if q is None and is_chosen:
                    q_text = percent(step.get("chosen_prob"))
                rows.append(
                    Content.assemble(
                        (rank, ".gen-panel--dim"),
                        (fit(token_label(tok), width), style),
                        " " + fit(percent(p) if p is not None else _("< top"), 7, "right"),
                        (" → ", ".gen-panel--dim"),
                        (f"{q_text:>7}", "bold" if q else ".gen-panel--dim"),
                        mark,
                    )
                )
        if not greedy:
            legend = _("plain: softmax of the logits; sampled: after temperature, top-k, top-p")
            rows += wrapped(Content.styled(legend, ".gen-panel--dim"), room)  # by cells: Chinese too
        rows.append(Content(""))
        return lines(rows)


class CostPanel(Panel):
    """Time per step as a chart, time to first token, mean decode step, tokens per second."""

    def compose(self) -> ComposeResult:
        # A comparison's verdict comes first: on a small terminal it is what must be in sight.
        yield Laid(id="cost-compare")
        yield Prose(id="cost-compare-text")
        yield Laid(id="cost-numbers")
        yield LatencyChart(id="latency-chart")
        yield Laid(id="cost-legend")
        yield Prose(id="cost-text")

    def draw(self, state: ViewState) -> None:
        """Shows the timings of `state` (and of its comparison, if any)."""
        self.name_keys()
        gen, comparison = state.gen, state.comparison
        chart = self.query_one(LatencyChart)
        if comparison is not None:
            self.border_title = _("Cost · no cache against cached")
            series = [
                Series(comparison.naive.step_ms, ["latency-chart--naive"] * len(comparison.naive.steps)),
                Series(comparison.cached.step_ms, ["latency-chart--cached"] * len(comparison.cached.steps)),
            ]
            entries = [("■", ".gen-panel--naive", _("no cache")), ("■", ".gen-panel--cached", _("cached"))]
        else:
            self.border_title = _("Cost · {key}: cost lab").format(key=key_name(self, "cost_lab"))
            kinds = ["latency-chart--first" if gen.is_first(i) else "latency-chart--decode" for i in range(len(gen.steps))]
            series = [Series(gen.step_ms, kinds)]
            first = _("prefill") if gen.settings.use_cache else _("first full pass")
            later = _("decode step") if gen.settings.use_cache else _("later full passes")
            entries = [("■", ".gen-panel--first", first), ("■", ".gen-panel--decode", later)]
        chart.show(series, state.index)
        self.query_one("#cost-legend", Laid).show(lambda width: legend_lines(entries, room_of(width)))
        self.query_one("#cost-numbers", Laid).show(self._numbers(state.facts, gen))
        compare, verdict = self.query_one("#cost-compare", Laid), self.query_one("#cost-compare-text", Prose)
        compare.show(self._compare(state) if comparison is not None else None)
        verdict.update(compare_text(state.facts, comparison) if comparison is not None else "")
        compare.display = verdict.display = comparison is not None
        text = bandwidth_text(state.facts, gen, state.index, key_name(self, "compare"))
        self.query_one("#cost-text", Prose).update(text)

    def _numbers(self, facts: RunFacts, gen: Generation) -> Content:
        cached = gen.settings.use_cache
        rows = [
            Content.assemble(
                (label(_("first token"), 12), ".gen-panel--dim"),
                (f"{num(gen.ttft_ms):>6} ms", "bold"),
                ("  " + (_("prefill") if cached else _("full pass")), ".gen-panel--dim"),
            ),
            Content.assemble(
                (label(_("decode step") if cached else _("later steps"), 12), ".gen-panel--dim"),
                (f"{num(gen.mean_decode_ms):>6} ms", "bold"),
                ("  " + _("mean of {n}").format(n=count(len(gen.decode_ms))), ".gen-panel--dim"),
            ),
            Content.assemble(
                (label(_("tokens/s"), 12), ".gen-panel--dim"),
                (f"{num(gen.tokens_per_s):>6}", "bold"),
                ("  " + _("incl. prefill"), ".gen-panel--dim"),
            ),
        ]
        rate = gen.decode_gb_per_s(facts)
        if rate is not None:
            rows.append(
                Content.assemble(
                    (label(_("memory read"), 12), ".gen-panel--dim"),
                    (f"{num(rate):>6}", "bold"),
                    (" " + _("GB/s decode"), ".gen-panel--dim"),
                )
            )
        share = busy_share(gen)
        if share is not None:  # the busy rule: the table says under what it was measured
            rows.append(Content.styled(_("measured while other processes used {share} of the CPUs").format(
                share=percent(share)), ".gen-panel--dim"))
        return lines(rows)

    def _compare(self, state: ViewState) -> Content:
        c = state.comparison
        assert c is not None
        header = " " * 10 + fit(_("total"), 9, "right") + "  " + fit(_("decode step"), 11, "right")
        rows = [
            Content.styled(header, ".gen-panel--dim"),
            Content.assemble(
                (label(_("no cache"), 10), ".gen-panel--naive"),
                f"{num(c.naive.total_ms):>6} ms  {num(c.naive.mean_decode_ms):>8} ms",
            ),
            Content.assemble(
                (label(_("cached"), 10), ".gen-panel--cached"),
                f"{num(c.cached.total_ms):>6} ms  {num(c.cached.mean_decode_ms):>8} ms",
            ),
        ]
        share = busy_share(c.naive, c.cached)
        if share is None:
            rows.append(Content.assemble(
                (label(_("speedup"), 10), ".gen-panel--dim"),
                (f"{num(c.speedup_total):>8}×", "bold"),
                (f"  {num(c.speedup_decode):>10}×", "bold"),
            ))
        else:  # the busy rule: times slowed by other processes, no speed-up from them
            rows.append(Content.assemble(
                (label(_("speedup"), 10), ".gen-panel--dim"),
                (_("— machine {share} busy").format(share=percent(share)), ".gen-panel--dim"),
            ))
        if c.identical:
            n = len(c.cached.ids)
            same = ngettext(
                "ids identical {mark} the {n} id, with and without the cache",
                "ids identical {mark} all {n}, with and without the cache",
                n,
            )
            rows.append(styled(same, ".gen-panel--dim", mark=("✓", ".gen-panel--good"), n=count(n)))
        else:
            differ = _("ids differ from step {step}: a bug").format(step=c.first_divergence)
            rows.append(Content.styled(differ, ".gen-panel--bad"))
        return lines(rows)


class KVPanel(Panel):
    """The KV cache after the step on show: per layer K and V shapes, bytes, the context used."""

    def compose(self) -> ComposeResult:
        yield Laid(id="kv-table")
        yield Prose(id="kv-text")

    def draw(self, state: ViewState) -> None:
        """Shows the cache after the step on show."""
        self.name_keys()
        gen, i, f = state.gen, state.index, state.facts
        self.border_title = _("KV cache") if i is None else _("KV cache after step {step}").format(step=i)
        self.query_one("#kv-table", Laid).show(lambda width: self._table(f, gen, i, room_of(width)))
        self.query_one("#kv-text", Prose).update(kv_text(f, gen, i, key_name(self, "compare")))

    @staticmethod
    def _context_bar(used: int, n_ctx: int, room: int) -> Content:
        """'context ███░░░ 17/128': positions used against the context limit."""
        name = _("context") + " "
        numbers = f" {count(used)}/{count(n_ctx)}"
        width = max(6, room - 1 - cell_len(name) - len(numbers))
        return Content.assemble(
            (name, ".gen-panel--dim"),
            (bar(used / n_ctx if n_ctx else 0, width).replace(" ", "░"), ".gen-panel--bar"),
            numbers,
        )

    def _table(self, f: RunFacts, gen: Generation, i: int | None, room: int) -> Content:
        n_ctx = gen.n_ctx
        if i is None:
            length = len(gen.prompt_ids)
            nothing = Content.styled(_("Nothing cached yet."), ".gen-panel--dim")
            return lines([nothing, self._context_bar(length, n_ctx, room), Content("")])
        kv = gen.steps[i].get("kv_cache")
        if not kv:
            L = gen.context_length(i)
            return lines(
                [
                    Content.styled(_("The cache is off: nothing is kept."), ".gen-panel--bad"),
                    *wrapped(
                        styled(_("each step recomputes K, V {shape}"), ".gen-panel--dim", shape=shape([1, f.n_kv_head, L, f.head_dim])),
                        room,
                        keep=SHAPE,  # a shape is never broken over two lines
                    ),
                    styled(
                        ngettext("in each of {n} layer", "in each of {n} layers", f.n_layer),
                        ".gen-panel--dim",
                        n=count(f.n_layer),
                    ),
                    self._context_bar(L, n_ctx, room),
                    Content(""),
                ]
            )
        layers = kv.get("layers") or []
        rows = [
            styled(
                ngettext("{length} position · {added} a token", "{length} positions · {added} a token", kv["length"]),
                ".gen-panel--dim",
                length=(count(kv["length"]), "bold"),
                added=(f"+{count(kv['bytes_per_position'])} B", "bold"),
            ),
            Content.assemble((label(_("used"), 10), ".gen-panel--dim"), (nbytes(kv["total_bytes"]), "bold")),
            *[Content.styled(line, ".gen-panel--dim") for line in kv_formula(f, kv["length"], room - 2)],
            Content.assemble((label(_("allocated"), 10), ".gen-panel--dim"), nbytes(kv["allocated_bytes"])),
            self._context_bar(kv["length"], kv["capacity"], room),
            Content(""),
        ]
        as_shape = shape if 2 * max((len(shape(x["k_shape"])) for x in layers), default=0) + 10 <= room else compact_shape
        col = max((cell_len(as_shape(x["k_shape"])) for x in layers), default=8)
        rows.append(Content.styled(label(_("layer"), 6) + f"{fit('K', col)}  V", ".gen-panel--dim"))
        n = len(layers)
        shown = list(range(n)) if n <= 6 else [0, 1, None, n - 1]
        for i in shown:
            if i is None:
                same = _("layers {first}–{last}: the same").format(first=2, last=n - 2)
                rows.append(Content.styled(f"{'⋮':>5} {same}", ".gen-panel--dim"))
                continue
            layer = layers[i]
            rows.append(
                Content.assemble(
                    (f"{layer['layer']:>5} ", ".gen-panel--dim"),
                    (fit(as_shape(layer["k_shape"]), col), ".gen-panel--shape"),
                    "  ",
                    (as_shape(layer["v_shape"]), ".gen-panel--shape"),
                )
            )
        rows.append(Content(""))
        return lines(rows)


class StatusLine(Static):
    """One line under the text: running, stopped, or why it ended; and which step is on show."""

    COMPONENT_CLASSES = {"status-line--good", "status-line--bad", "status-line--dim"}
    _drawn: tuple | None = None  # what the last draw showed: drawn again at a new width

    def on_resize(self) -> None:
        if self._drawn is not None:
            self.draw(*self._drawn)  # the fields that fit beside the sentence are the width's

    def draw(self, state: ViewState, phase: str, replay: bool) -> None:
        """Shows where the generation of `state` stands: one whole sentence per state, its mark
        (● running, ○ not started, ■ stopped, ✓ done) in the state's colour."""
        self._drawn = (state, phase, replay)
        gen = state.gen
        n, total = len(gen.steps), gen.settings.max_new_tokens
        good, bad, dim = ".status-line--good", ".status-line--bad", ".status-line--dim"
        progress = {"n": count(n), "total": count(total)}
        if phase == "comparing":
            # The run's label is a msgid ('no cache', 'cached'), translated where it is shown.
            text = ngettext(
                "{mark} comparing {run}: {n} of {total} token", "{mark} comparing {run}: {n} of {total} tokens", total
            )
            head = styled(text, mark=("●", good), run=_(gen.label), **progress)
        elif state.running:
            text = ngettext("{mark} generating {n} of {total} token", "{mark} generating {n} of {total} tokens", total)
            head = styled(text, mark=("●", good), **progress)
        elif gen.stop_reason is None and total == 0:
            text = _("{mark} not started: 0 new tokens asked for. {key} sets how many.")
            head = styled(text, mark=("○", dim), key=(key_name(self, "settings"), "bold"))
        elif gen.stop_reason is None:
            head = styled(_("{mark} not started"), mark=("○", dim))
        elif state.comparison is not None:
            c = state.comparison
            speedup = {"speedup_total": num(c.speedup_total), "speedup_decode": num(c.speedup_decode)}
            if busy_share(c.naive, c.cached) is not None:  # the busy rule: no speed-up from such times
                text = (_("{mark} compared · ids identical · timed while the machine was busy") if c.identical
                        else _("{mark} compared · ids differ from step {step}: a bug · timed while the machine was busy"))
                head = styled(text, mark=("✓", good), step=(str(c.first_divergence), bad))
            elif c.identical:
                text = _("{mark} compared · ids identical · speedup {speedup_total}× in all, {speedup_decode}× per decode step")
                head = styled(text, mark=("✓", good), **speedup)
            else:
                text = _(
                    "{mark} compared · ids differ from step {step}: a bug · speedup {speedup_total}× in all, "
                    "{speedup_decode}× per decode step"
                )
                head = styled(text, mark=("✓", good), step=(str(c.first_divergence), bad), **speedup)
        elif gen.can_resume:
            text = ngettext(
                "{mark} stopped after {n} of {total} token. {key} resumes.",
                "{mark} stopped after {n} of {total} tokens. {key} resumes.",
                total,
            )
            head = styled(text, mark=("■", bad), key=(key_name(self, "resume"), "bold"), **progress)
        else:
            head = styled(_("{mark} done {reason}"), good, mark=("✓", good), reason=stop_text(gen))
        # What else holds for the view, each a field of its own after the state.
        fields = [head]
        if replay:
            fields.append(Content.styled(_("recorded"), dim))
        if state.selected is not None and gen.steps:
            fields.append(Content.styled(_("showing step {step}").format(step=state.index), dim))
        # The state's sentence is whole, wrapped to a second line if it must (Chinese at 80
        # columns, broken as Chinese breaks); the fields after it only where they take no line more.
        room = self.content_size.width
        separator = Content.styled("  · ", dim)
        laid = laid_lines(separator.join(fields), room)
        lines = laid_lines(head, room).plain.count("\n")
        while len(fields) > 1 and laid.plain.count("\n") > lines:
            fields.pop()
            laid = laid_lines(separator.join(fields), room)
        self.update(laid)
