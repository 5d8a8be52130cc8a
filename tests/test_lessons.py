"""The guided lessons' files (gpt2viz/lessons/*.toml) against the app: every page's stages exist
for models of 2 to 12 blocks, its keys are the step-through's, its templates exist in both
languages with the same placeholders, all of which this run's facts fill, and every prediction's
answer is a measured fact. Then how a guess is read and how progress is kept."""

from __future__ import annotations

import json
import re
import string
from pathlib import Path

from types import SimpleNamespace

import pytest

from gpt2viz.i18n.templates import table
from gpt2viz.lessons import LESSON_IDS, LessonError, load_lesson
from gpt2viz.trace import load
from gpt2viz.tui.lesson_facts import MEASURED, lesson_answers, lesson_facts, measured, page_text
from gpt2viz.tui.lesson_run import LessonRun, read_guess, stage_key, state_path
from gpt2viz.tui.screens.step import StepScreen
from gpt2viz.tui.stages import build_stages, index_by_key

TINY_TRACE = Path(__file__).resolve().parent / "data" / "tiny-trace.json"
STEP_KEYS = {key for binding in StepScreen.BINDINGS for key in binding.key.split(",")}
SWITCH_OFF_KEYS = {key for binding in StepScreen.BINDINGS if binding.action == "what_if" for key in binding.key.split(",")}
# The step-through's keys that open the screens a page may ask for (gpt2viz.lessons.SCREENS).
KEYS_OPENING = {
    screen: {key for binding in StepScreen.BINDINGS if binding.action == action for key in binding.key.split(",")}
    for screen, action in (("generation", "generate"), ("cost_lab", "cost_lab"))
}


def placeholders(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def templates_of(page) -> list[str]:
    keys = [page.text] + [k for k in (page.do, page.look) if k] + (["lesson.unavailable.what_if"] if page.until_off else [])
    if page.predict is not None:
        keys += [page.predict.question, page.predict.why]
    return keys


# A cost lab result as far as the lessons read it: the batch sweep's steps of 1 and 8 sequences.
FAKE_LAB = SimpleNamespace(batch=SimpleNamespace(
    context=64, others_cpu=None,
    rows=[SimpleNamespace(batch=1, step_ms=2.0), SimpleNamespace(batch=8, step_ms=3.1)]))


def test_the_lab_s_batch_sweep_answers_the_batch_guess():
    lab = measured(FAKE_LAB)
    assert lab.answers == {"batch_step_ratio": pytest.approx(1.55)} and lab.busy_share is None
    assert lab.facts["batch_step_ratio"] == "1.55" and lab.facts["batch_tokens_gain"] == "5.16"
    assert measured(None).answers == {} and measured(SimpleNamespace(batch=None)).answers == {}
    busy = SimpleNamespace(batch=SimpleNamespace(**{**vars(FAKE_LAB.batch), "others_cpu": 0.8}))
    assert measured(busy).busy_share == 0.8


@pytest.fixture(scope="module")
def tiny_trace():
    return load(TINY_TRACE)


@pytest.fixture(scope="module")
def recorded(bundled):
    """A trace recorded now (the committed one predates what later traces hold: the sampling cuts)."""
    from gpt2viz.trace import trace_prompt

    return trace_prompt(bundled, "The meaning of life is")


# Answers a trace holds only since it was written with them (the sampling cuts: 2026-12-06).
LATER_ANSWERS = {"nucleus_90"}


@pytest.mark.parametrize("lesson_id", LESSON_IDS)
@pytest.mark.parametrize("which", ["recorded", "committed"])
def test_every_lesson_file_holds_together(lesson_id, which, recorded, tiny_trace):
    tiny_trace = recorded if which == "recorded" else tiny_trace  # the committed one is older
    lesson = load_lesson(lesson_id)
    assert 10 <= len(lesson.pages) <= 25
    lab = measured(FAKE_LAB)  # what the cost lab adds once it has run
    facts, answers = {**lesson_facts(tiny_trace), **lab.facts}, {**lesson_answers(tiny_trace), **lab.answers}
    english, chinese = table("en"), table("zh")
    for number, page in enumerate(lesson.pages, 1):
        where = f"lesson {lesson_id} page {number}"
        for n_layer in (2, 7, 12):  # a test model's, the bundled model's, GPT-2 small's
            stages = build_stages(n_layer)
            for key in (page.show, page.until, page.predict and page.predict.reveal):
                if key is not None:
                    assert index_by_key(stages, stage_key(key, n_layer)) is not None, (where, key, n_layer)
        assert page.head < 2 and (page.until_head or 0) < 2, where  # every model here has 2 heads or more
        if page.until_off:  # the key of the what-if, on a block's stage
            assert page.do is not None and page.press in SWITCH_OFF_KEYS and page.show.startswith("blocks."), where
        elif page.until is not None or page.until_head is not None:
            assert page.do is not None and page.press in STEP_KEYS, (where, page.press)
        elif page.until_screen is not None:  # the key is the step-through's for that screen
            assert page.do is not None and page.press in KEYS_OPENING[page.until_screen], (where, page.press)
            assert page.look is not None, (where, "say what to look at on that screen")
        else:
            assert page.press is None and page.do is None, where
        shown = page_text(page.text, facts)  # the form of the page this trace shows
        assert "?" not in english[shown].format_map(facts), (where, shown)  # no number left unknown
        for key in templates_of(page) + [lesson.title] + [shown]:
            assert key in english and key in chinese, (where, key)
            assert placeholders(english[key]) == placeholders(chinese[key]), (where, key)
            assert placeholders(english[key]) <= set(facts), (where, key, placeholders(english[key]) - set(facts))
            english[key].format_map(facts), chinese[key].format_map(facts)
        if page.predict is not None and (which == "recorded" or page.predict.answer not in LATER_ANSWERS):
            assert page.predict.answer in answers and 0 < page.predict.tolerance < 1, where
            if page.predict.answer in MEASURED:  # the page sends the learner to where it is measured
                assert page.until_screen == "cost_lab" and page.look is not None, where
            else:  # the trace alone answers it, on a replay too
                assert page.predict.answer in lesson_answers(tiny_trace), where
    assert any(page.predict for page in lesson.pages) and any(page.acts for page in lesson.pages)


def test_lesson_004_s_answers_are_the_trace_s_sizes(tiny_trace):
    """Worked out here from the trace's config, apart from lesson_facts: the prompt as vectors,
    the MLP's share of a block, the prompt pass's multiply-adds per byte of weights."""
    config, answers = tiny_trace.model["config"], lesson_answers(tiny_trace)
    T, C, F, V, n_layer = len(tiny_trace.tokens), config["n_embd"], 4 * config["n_embd"], config["vocab_size"], config["n_layer"]
    assert tiny_trace.model["dtype"] == "float32" and (config.get("n_inner") or F) == F
    assert answers["embedded_bytes"] == T * C * 4
    mlp, attention, norms = 2 * C * F + F + C, 4 * C * C + 4 * C, 4 * C
    assert answers["mlp_share_percent"] == pytest.approx(100 * mlp / (mlp + attention + norms))
    step = n_layer * (4 * C * C + 2 * C * F) + C * V
    # This committed trace predates `step_weight_bytes`: every weight but wpe's other rows.
    read = tiny_trace.model["weight_bytes"] - (config["n_ctx"] - 1) * C * 4
    assert answers["prefill_macs_per_byte"] == pytest.approx(T * step / read)
    assert answers["prefill_macs_per_byte"] == pytest.approx(T * answers["macs_per_byte"])


def test_the_file_s_bytes_and_the_model_s_are_told_apart():
    """The bundled model's file stores float16 and the model holds float32: lesson 001 says both
    sizes (a learner walk read "26,886,272 B as float32" for a file of 13,443,136 B)."""
    import gpt2viz
    from gpt2viz.i18n import say
    from gpt2viz.trace import trace_prompt

    facts = lesson_facts(trace_prompt(gpt2viz.load_model("tiny"), "Hello"))
    assert (facts["stored"], facts["file_bytes"]) == ("F16", "13,443,136 B (12.8 MiB)")
    assert ("stored as F16 (13,443,136 B (12.8 MiB)) and held as float32 (26,886,272 B (25.6 MiB))"
            in say("lesson.001.safetensors", **facts))


def test_every_screen_a_page_may_ask_for_has_its_key():
    from gpt2viz.lessons import SCREENS

    assert set(KEYS_OPENING) == set(SCREENS) and all(KEYS_OPENING.values())
    for language in ("en", "zh"):  # the note those screens show a page's `look` in
        assert placeholders(table(language)["lesson.note"]) == {"lesson", "page", "pages", "look"}


def test_a_broken_lesson_file_is_refused(monkeypatch):
    from gpt2viz import lessons

    with pytest.raises(LessonError):
        load_lesson("999")
    monkeypatch.setattr(lessons, "LESSON_IDS", ("000",))
    original = lessons.resources.files

    class Broken:
        def joinpath(self, name):
            return self

        def read_text(self, encoding):
            return 'title = "t"\ntutorial = "000"\n[[pages]]\ntext = "x"\nshow = "tokenize"\nsurprise = 1\n'

    monkeypatch.setattr(lessons.resources, "files", lambda package: Broken())
    with pytest.raises(LessonError, match="surprise"):
        load_lesson("000")
    monkeypatch.setattr(lessons.resources, "files", original)


@pytest.mark.parametrize("typed, value", [
    ("85000", 85000), ("85,000", 85000), ("85 000", 85000), ("8.5e4", 85000), ("85k", 85000), ("85K", 85000),
    ("1.2M", 1.2e6), ("0.3", 0.3), ("4.5%", 4.5), ("1.5 MiB", 1.5 * 2**20), ("2 MB", 2e6), ("3万", 30000),
    ("1，000", 1000), (" 42 ", 42), (".5", 0.5),
])
def test_a_guess_is_read_as_people_type_numbers(typed, value):
    assert read_guess(typed) == pytest.approx(value)


@pytest.mark.parametrize("typed", ["", "lots", "-5", "1.2.3x", "5 parsecs", "inf", "nan"])
def test_what_is_no_number_is_refused(typed):
    assert read_guess(typed) is None


def test_a_number_below_0_is_told_apart_from_no_number_and_0_is_a_guess():
    """-5000 is a number, refused as a guess for a reason of its own (the field once dropped the
    minus unseen and judged '5,000'); 0 is a guess (a one-token prompt's mask removes 0 scores)."""
    from gpt2viz.tui.lesson_run import read_number
    from gpt2viz.tui.widgets.lesson_panel import GuessInput

    assert read_number("-5000") == -5000 and read_guess("-5000") is None and read_number("lots") is None
    assert read_guess("0") == 0
    assert re.fullmatch(GuessInput.GUESS_CHARACTERS, "-5000")


def test_progress_is_kept_per_lesson_and_resumed(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    lesson = load_lesson("000")
    run = LessonRun.start(lesson)
    assert run.page == 0 and not run.resumed
    asking = next(i for i, page in enumerate(lesson.pages) if page.until is not None)
    while run.page < asking:
        assert run.turn(+1)
    assert run.turn(+1) and asking in run.skipped  # n on a page not done: skipped, not forced
    assert run.turn(-1) and run.page == asking
    page = lesson.pages[asking]
    assert run.observe(stage_key(page.until, 7), 0, 7) and asking in run.done and asking not in run.skipped
    again = LessonRun.start(lesson)
    assert (again.page, again.done, again.resumed) == (asking, {asking}, True)
    assert json.loads(state_path().read_text())["000"]["page"] == asking
    assert not again.turn(-asking - 1)  # nowhere before the first page
    # A damaged file starts afresh; one that cannot be written loses only the resuming.
    state_path().write_text("{not json")
    assert LessonRun.start(lesson).page == 0
    state_path().write_text(json.dumps({"000": {"page": "x", "done": [1]}}))
    assert LessonRun.start(lesson).page == 0
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "file"))
    (tmp_path / "file").write_text("")
    fresh = LessonRun.start(lesson)
    assert fresh.turn(+1) and fresh.page == 1


def test_the_mask_sum_is_written_out_for_a_short_prompt(tiny_trace):
    """'0 + 1 + … + 0 = 0' for a one-token prompt: the terms there are, and the ellipsis only for many."""
    import copy

    from gpt2viz.tui.lesson_facts import lesson_facts

    assert len(tiny_trace.tokens) == 5 and lesson_facts(tiny_trace)["masked_sum"] == "0 + 1 + … + 4"
    for n, written in ((1, "0"), (3, "0 + 1 + 2")):
        short = copy.copy(tiny_trace)
        short.tokens = tiny_trace.tokens[:n]
        assert lesson_facts(short)["masked_sum"] == written


@pytest.mark.parametrize("language", ["en", "zh"])
def test_a_one_token_prompt_is_counted_in_the_singular(tiny_trace, tiny_lm, language):
    """A learner walk with the prompt 'Hi' read "cut your prompt into 1 tokens", "(1 scores for 1
    positions)": every page of every lesson, in both languages, says 1 token, 1 position, 1 score."""
    from gpt2viz.i18n import set_language
    from gpt2viz.trace import trace_prompt

    one = trace_prompt(tiny_lm, "Hi")
    assert len(one.tokens) == 1
    set_language(language)
    facts = {**lesson_facts(one), **measured(FAKE_LAB).facts}
    texts = [table(language)[key].format_map(facts) for lesson_id in LESSON_IDS
             for page in load_lesson(lesson_id).pages for key in templates_of(page)]
    plural = re.compile(r"\b1 (tokens|positions|scores|vectors|pieces|token ids)\b")
    assert not [t for t in texts if plural.search(t)]
    if language == "en":
        assert any("into 1 token:" in t for t in texts) and any("(1 score for 1 position)" in t for t in texts)
    else:
        assert any("切成了 1 个 token：" in t for t in texts)
    assert lesson_facts(tiny_trace)["T_tokens"] == ("5 tokens" if language == "en" else "5 个 token")


def test_a_prompt_cut_into_pieces_of_characters_is_told_so(bundled):
    """A Chinese prompt comes as pieces of UTF-8 bytes (\\xe6\\xb3 ...): the tokenize page says so
    and counts them, where "the model never sees letters" explained nothing (a learner walk)."""
    from gpt2viz.i18n.templates import say
    from gpt2viz.trace import trace_prompt
    from gpt2viz.tui.lesson_facts import lesson_facts, page_text

    chinese = lesson_facts(trace_prompt(bundled, "法国的首都是"))
    assert chinese["byte_pieces"] == "9"  # 11 tokens: 的 and 是 whole, the other four characters in pieces
    assert page_text("lesson.000.tokenize", chinese) == "lesson.000.tokenize.byte_pieces"
    assert "9 of them here" in say(page_text("lesson.000.tokenize", chinese), **chinese)
    english = lesson_facts(trace_prompt(bundled, "The capital of France is"))
    assert english["byte_pieces"] == "0" and page_text("lesson.000.tokenize", english) == "lesson.000.tokenize"
    assert page_text("lesson.001.matmul", chinese) == "lesson.001.matmul"  # pages without the form keep theirs


def test_the_nucleus_page_s_answer_is_the_distribution_s(recorded, tiny_trace):
    """Top-p 0.9's nucleus as generate draws from it: the most likely tokens, in order, until their
    probability reaches 0.9 (worked out here from the model's own logits); top-k's mass likewise.
    A trace from before the sampling cuts were recorded gives no answer and says '?'."""
    import torch

    import gpt2viz

    lm = gpt2viz.load_model("tiny")
    logits, _ = lm.model(torch.tensor([lm.encode_prompt("The meaning of life is")]))
    probs = torch.softmax(logits[0, -1].double(), -1).sort(descending=True).values
    before = probs.cumsum(0) - probs
    assert lesson_answers(recorded)["nucleus_90"] == int((before < 0.9).sum())
    facts = lesson_facts(recorded)
    assert facts["top_k_50_mass"] == f"{100 * float(probs[:50].sum()):.1f}%"
    assert "nucleus_90" not in lesson_answers(tiny_trace) and lesson_facts(tiny_trace)["nucleus_90"] == "?"
