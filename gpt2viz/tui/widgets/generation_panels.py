"""The parts of the generation view: the text, the chosen step, the cost, the KV cache.

Each draws itself from one ViewState (plain data: the run's facts, the generation's step records,
a comparison if one was run, the selected step), so a live run and a replayed trace look alike.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.cells import cell_len
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from ..formatting import clip, compact_shape, count, fit, nbytes, num, percent, prose, prose_line, shape
from ..generation import Comparison, Generation
from ..generation_narration import (
    bandwidth_text,
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
from .latency_chart import LatencyChart, Series
from .pictures import CHIP_A, CHIP_B, CURRENT, NEW, bar

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


class GeneratedText(Static):
    """The prompt, dimmed, and the generated tokens after it; token boundaries on request.

    Lives in a TextPanel, whose component classes style it.
    """

    def draw(self, state: ViewState, boundaries: bool) -> None:
        """Shows the text of `state`, the step on show highlighted when one is selected."""
        parts: list[tuple[str, str] | str] = []
        for i, text in enumerate(state.gen.prompt_tokens):
            if boundaries:
                parts += [(text, PROMPT_CHIP_A if i % 2 == 0 else PROMPT_CHIP_B), " "]
            else:
                parts.append((prose(text), ".gen-panel--prompt"))
        if not boundaries:
            parts.append(("│", ".gen-panel--dim"))
        chosen = state.selected
        for i, step in enumerate(state.gen.steps):
            text = step["text"]
            if i == chosen:
                style = CURRENT
            elif boundaries:
                style = CHIP_A if i % 2 == 0 else CHIP_B
            else:
                style = ".gen-panel--new"
            parts.append((text if boundaries else prose(text), style))
            if boundaries:
                parts.append(" ")
        if state.running:
            parts.append(("▌", ".gen-panel--cursor"))
        self.update(Content.assemble(*parts))


class Panel(VerticalScroll, inherit_bindings=False):
    """A titled column of the generation view (its title is the border title).

    It scrolls up and down only: left and right stay free for moving between steps.
    """

    BINDINGS = [
        Binding("up", "scroll_up", "scroll up", show=False),
        Binding("down", "scroll_down", "scroll down", show=False),
        Binding("pageup", "page_up", "page up", show=False),
        Binding("pagedown", "page_down", "page down", show=False),
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

    @property
    def room(self) -> int:
        """Cells per line inside the panel."""
        return max(24, self.scrollable_content_region.width or 36)

    MORE_BELOW = {True: "↓ more", False: "tab ↓ more"}  # focused or not: how to read the rest

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        self.show_more_hint()

    def on_resize(self) -> None:
        self.call_after_refresh(self.show_more_hint)

    def on_focus(self) -> None:
        self.show_more_hint()

    def on_blur(self) -> None:
        self.show_more_hint()

    def show_more_hint(self) -> None:
        """Says in the bottom border when part of the panel is out of sight below."""
        more = self.max_scroll_y > 0 and self.scroll_y < self.max_scroll_y
        self.border_subtitle = self.MORE_BELOW[self.has_focus] if more else ""


class TextPanel(Panel):
    """The text so far, following its end while tokens arrive."""

    def show_more_hint(self) -> None:
        """The text panel's bottom border names the b key instead (it follows the text's end)."""

    def compose(self) -> ComposeResult:
        yield GeneratedText(id="gen-text")

    def draw(self, state: ViewState, boundaries: bool) -> None:
        """Shows the text and keeps its end (or the step on show) in sight."""
        # With little room the prompt scrolls out of sight: the title keeps it.
        self.border_title = f'Text · prompt "{clip(prose_line(state.gen.prompt_tokens), 40)}"'
        self.query_one(GeneratedText).draw(state, boundaries)
        if state.selected is None:
            self.call_after_refresh(self.scroll_end, animate=False)


class ChoicePanel(Panel):
    """The step on show: its top candidates before and after the settings, its shapes, its words."""

    def compose(self) -> ComposeResult:
        yield Static(id="choice-table")
        yield Static(id="choice-text")
        yield Static(id="choice-flow")
        yield Static(id="choice-step-text")

    def draw(self, state: ViewState) -> None:
        """Shows the choice of the step on show."""
        gen, i = state.gen, state.index
        if i is None:
            self.border_title = "Next token"
            self.query_one("#choice-table", Static).update(Content.styled("No token yet.", ".gen-panel--dim"))
            for name in ("#choice-text", "#choice-flow", "#choice-step-text"):
                self.query_one(name, Static).update("")
            return
        self.border_title = step_heading(gen, i)
        self.query_one("#choice-table", Static).update(self._table(gen, i))
        self.query_one("#choice-text", Static).update(Content(choice_text(gen, i)))
        flow = lines([Content(line) for line in step_flow(state.facts, gen, i)])
        self.query_one("#choice-flow", Static).update(flow.highlight_regex(r"\[[0-9][0-9, ]*\]", style=".gen-panel--shape"))
        self.query_one("#choice-step-text", Static).update(Content(step_text(state.facts, gen, i)))

    def _table(self, gen: Generation, i: int) -> Content:
        step = gen.steps[i]
        raw = step.get("raw") or {"ids": [], "tokens": [], "probs": []}
        cand = step.get("candidates") or {"ids": [], "tokens": [], "probs": []}
        greedy = gen.settings.sampling.greedy
        room = self.room
        width = max(6, min(TOKEN_WIDTH, room - (23 if not greedy else 22)))
        rows = [
            Content.assemble(
                ("chose ", ".gen-panel--dim"),
                (step["text"], NEW),
                (f"  id {step['id']}  p {percent(step.get('chosen_prob'))}", ""),
            )
        ]
        if greedy:
            rows.append(Content.styled(f"   {fit('token', width)} {'softmax':>7}", ".gen-panel--dim"))
        else:
            rows.append(Content.styled(f"   {fit('token', width)} {'plain':>7}   {'sampled':>7}", ".gen-panel--dim"))
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
                        (fit(tok, width), style),
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
                        (fit(tok, width), style),
                        f" {percent(p) if p is not None else '< top':>7}",
                        (" → ", ".gen-panel--dim"),
                        (f"{q_text:>7}", "bold" if q else ".gen-panel--dim"),
                        mark,
                    )
                )
        if not greedy:
            rows.append(Content.styled("plain: softmax of the logits; sampled: after temperature, top-k, top-p", ".gen-panel--dim"))
        rows.append(Content(""))
        return lines(rows)


class CostPanel(Panel):
    """Time per step as a chart, time to first token, mean decode step, tokens per second."""

    def compose(self) -> ComposeResult:
        # A comparison's verdict comes first: on a small terminal it is what must be in sight.
        yield Static(id="cost-compare")
        yield Static(id="cost-numbers")
        yield LatencyChart(id="latency-chart")
        yield Static(id="cost-legend")
        yield Static(id="cost-text")

    def draw(self, state: ViewState) -> None:
        """Shows the timings of `state` (and of its comparison, if any)."""
        gen, comparison = state.gen, state.comparison
        chart = self.query_one(LatencyChart)
        if comparison is not None:
            self.border_title = "Cost · no cache against cached"
            series = [
                Series("no cache", comparison.naive.step_ms, ["latency-chart--naive"] * len(comparison.naive.steps)),
                Series("cached", comparison.cached.step_ms, ["latency-chart--cached"] * len(comparison.cached.steps)),
            ]
            legend = Content.assemble(("■", ".gen-panel--naive"), " no cache   ", ("■", ".gen-panel--cached"), " cached")
        else:
            self.border_title = "Cost · m: cost lab"
            kinds = ["latency-chart--first" if gen.is_first(i) else "latency-chart--decode" for i in range(len(gen.steps))]
            series = [Series("time", gen.step_ms, kinds)]
            first = "prefill" if gen.settings.use_cache else "first full pass"
            later = "decode step" if gen.settings.use_cache else "later full passes"
            legend = Content.assemble(("■", ".gen-panel--first"), f" {first}   ", ("■", ".gen-panel--decode"), f" {later}")
        chart.show(series, state.index)
        self.query_one("#cost-legend", Static).update(legend)
        self.query_one("#cost-numbers", Static).update(self._numbers(state.facts, gen))
        compare = self.query_one("#cost-compare", Static)
        compare.update(self._compare(state) if comparison is not None else "")
        compare.display = comparison is not None
        self.query_one("#cost-text", Static).update(Content(bandwidth_text(state.facts, gen, state.index)))

    def _numbers(self, facts: RunFacts, gen: Generation) -> Content:
        cached = gen.settings.use_cache
        rows = [
            Content.assemble(
                ("first token ", ".gen-panel--dim"),
                (f"{num(gen.ttft_ms):>6} ms", "bold"),
                ("  prefill" if cached else "  full pass", ".gen-panel--dim"),
            ),
            Content.assemble(
                ("decode step " if cached else "later steps ", ".gen-panel--dim"),
                (f"{num(gen.mean_decode_ms):>6} ms", "bold"),
                (f"  mean of {len(gen.decode_ms)}", ".gen-panel--dim"),
            ),
            Content.assemble(
                ("tokens/s    ", ".gen-panel--dim"), (f"{num(gen.tokens_per_s):>6}", "bold"), ("  incl. prefill", ".gen-panel--dim")
            ),
        ]
        rate = gen.decode_gb_per_s(facts)
        if rate is not None:
            rows.append(
                Content.assemble(
                    ("memory read ", ".gen-panel--dim"), (f"{num(rate):>6}", "bold"), (" GB/s decode", ".gen-panel--dim")
                )
            )
        return lines(rows)

    def _compare(self, state: ViewState) -> Content:
        c = state.comparison
        assert c is not None
        rows = [
            Content.styled(f"{'':<10}{'total':>9}  {'decode step':>11}", ".gen-panel--dim"),
            Content.assemble(("no cache  ", ".gen-panel--naive"), f"{num(c.naive.total_ms):>6} ms  {num(c.naive.mean_decode_ms):>8} ms"),
            Content.assemble(("cached    ", ".gen-panel--cached"), f"{num(c.cached.total_ms):>6} ms  {num(c.cached.mean_decode_ms):>8} ms"),
            Content.assemble(
                ("speedup   ", ".gen-panel--dim"),
                (f"{num(c.speedup_total):>8}×", "bold"),
                (f"  {num(c.speedup_decode):>10}×", "bold"),
            ),
        ]
        if c.identical:
            rows.append(
                Content.assemble(
                    ("ids identical ✓ ", ".gen-panel--good"),
                    (f"all {len(c.cached.ids)}, with and without the cache", ".gen-panel--dim"),
                )
            )
        else:
            rows.append(Content.styled(f"ids differ from step {c.first_divergence}: a bug", ".gen-panel--bad"))
        rows += [Content(""), Content(compare_text(state.facts, c)), Content("")]
        return lines(rows)


class KVPanel(Panel):
    """The KV cache after the step on show: per layer K and V shapes, bytes, the context used."""

    def compose(self) -> ComposeResult:
        yield Static(id="kv-table")
        yield Static(id="kv-text")

    def draw(self, state: ViewState) -> None:
        """Shows the cache after the step on show."""
        gen, i, f = state.gen, state.index, state.facts
        self.border_title = "KV cache" + (f" after step {i}" if i is not None else "")
        self.query_one("#kv-table", Static).update(self._table(f, gen, i))
        self.query_one("#kv-text", Static).update(Content(kv_text(f, gen, i)))

    def _context_bar(self, used: int, n_ctx: int) -> Content:
        """'context ███░░░ 17/128': positions used against the context limit."""
        numbers = f" {count(used)}/{count(n_ctx)}"
        width = max(6, self.room - 9 - len(numbers))
        return Content.assemble(
            ("context ", ".gen-panel--dim"),
            (bar(used / n_ctx if n_ctx else 0, width).replace(" ", "░"), ".gen-panel--bar"),
            numbers,
        )

    def _table(self, f: RunFacts, gen: Generation, i: int | None) -> Content:
        n_ctx = gen.n_ctx
        if i is None:
            length = len(gen.prompt_ids)
            return lines([Content.styled("Nothing cached yet.", ".gen-panel--dim"), self._context_bar(length, n_ctx), Content("")])
        kv = gen.steps[i].get("kv_cache")
        if not kv:
            L = gen.context_length(i)
            return lines(
                [
                    Content.styled("The cache is off: nothing is kept.", ".gen-panel--bad"),
                    Content.assemble(("each step recomputes K, V ", ".gen-panel--dim"), shape([1, f.n_head, L, f.head_dim])),
                    Content.assemble(("in each of ", ".gen-panel--dim"), f"{f.n_layer}", (" layers", ".gen-panel--dim")),
                    self._context_bar(L, n_ctx),
                    Content(""),
                ]
            )
        layers = kv.get("layers") or []
        room = self.room
        rows = [
            Content.assemble(
                (f"{kv['length']}", "bold"),
                (" positions · ", ".gen-panel--dim"),
                (f"+{count(kv['bytes_per_position'])} B", "bold"),
                (" a token", ".gen-panel--dim"),
            ),
            Content.assemble(("used      ", ".gen-panel--dim"), (nbytes(kv["total_bytes"]), "bold")),
            *[Content.styled(line, ".gen-panel--dim") for line in kv_formula(f, kv["length"], room - 2)],
            Content.assemble(("allocated ", ".gen-panel--dim"), nbytes(kv["allocated_bytes"])),
            self._context_bar(kv["length"], kv["capacity"]),
            Content(""),
        ]
        as_shape = shape if 2 * max((len(shape(x["k_shape"])) for x in layers), default=0) + 10 <= room else compact_shape
        col = max((cell_len(as_shape(x["k_shape"])) for x in layers), default=8)
        rows.append(Content.styled(f"layer {fit('K', col)}  V", ".gen-panel--dim"))
        n = len(layers)
        shown = list(range(n)) if n <= 6 else [0, 1, None, n - 1]
        for i in shown:
            if i is None:
                rows.append(Content.styled(f"{'⋮':>5} layers 2–{n - 2}: the same", ".gen-panel--dim"))
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

    def draw(self, state: ViewState, phase: str, replay: bool) -> None:
        """Shows where the generation of `state` stands."""
        gen = state.gen
        n, total = len(gen.steps), gen.settings.max_new_tokens
        if phase == "comparing":
            head = [("● comparing ", ".status-line--good"), f"{gen.label}: {n} of {total} tokens"]
        elif state.running:
            head = [("● generating ", ".status-line--good"), f"{n} of {total} tokens"]
        elif gen.stop_reason is None and total == 0:
            head = [("○ ", ".status-line--dim"), "not started: 0 new tokens asked for.", (" s sets how many.", ".status-line--dim")]
        elif gen.stop_reason is None:
            head = [("○ ", ".status-line--dim"), "not started"]
        elif state.comparison is not None:
            c = state.comparison
            verdict = ("ids identical", ".status-line--good") if c.identical else (
                f"ids differ from step {c.first_divergence}: a bug", ".status-line--bad")
            head = [
                ("✓ compared · ", ".status-line--good"),
                verdict,
                f" · speedup {num(c.speedup_total)}× in all, {num(c.speedup_decode)}× per decode step",
            ]
        elif gen.can_resume:
            head = [("■ stopped ", ".status-line--bad"), f"after {n} of {total} tokens.", (" space resumes.", ".status-line--dim")]
        else:
            head = [("✓ done ", ".status-line--good"), stop_text(gen)]
        if replay:
            head.append(("  · recorded", ".status-line--dim"))
        if state.selected is not None and gen.steps:
            head.append((f"  · step {state.index} on show", ".status-line--dim"))
        self.update(Content.assemble(*head))
