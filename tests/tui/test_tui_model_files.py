"""The Model files stage and the map of the model, driven as a person would: the walk starts at the
model's files, whose tensor count and bytes are what the `safetensors` library reports; `o` shows the
map from every stage with that stage highlighted; both read at 80 x 24 and 120 x 40, in English and
Chinese, on the bundled `tiny` and on a GPT-2-small-shaped checkpoint."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from rich.cells import cell_len
from safetensors import safe_open

import gpt2viz
from tui_helpers import TINY_TRACE, run_async, stage_text, stages_in_blocks
from zh_words import english_words, run_words
from gpt2viz.i18n import count, set_language
from gpt2viz.model.sources import bundled_dir
from gpt2viz.trace import Trace, load, trace_prompt
from gpt2viz.tui.app import make_app
from gpt2viz.tui.commands import KeyCommands
from gpt2viz.tui.screens.help import HelpScreen, key_rows
from gpt2viz.tui.screens.model_map import ModelMapScreen
from gpt2viz.tui.screens.step import StepScreen
from gpt2viz.tui.stages import Stage, index_of
from gpt2viz.tui.widgets.model_files_view import ModelFilesPicture
from gpt2viz.tui.narration import narrate
from gpt2viz.tui.widgets.model_map import ModelMap, map_lines

NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
SIZES = [(80, 24), (120, 40)]


def safetensors_report(path) -> tuple[int, int]:
    """How many tensors the file holds and their bytes together, as the library says."""
    with safe_open(str(path), framework="pt") as f:
        names = list(f.keys())
        return len(names), sum(f.get_tensor(name).nbytes for name in names)


@pytest.fixture(scope="module")
def bundled_trace():
    return trace_prompt(gpt2viz.load_model("tiny"), "The meaning of life is")


async def step_screen(app, pilot) -> StepScreen:
    for _ in range(200):
        await pilot.pause()
        if isinstance(app.screen, StepScreen):
            return app.screen
    raise AssertionError(f"still on {type(app.screen).__name__}")


def picture_lines(app, widget_type) -> list[str]:
    picture = app.screen.query_one(widget_type)
    return picture.content.plain.split("\n")


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
@pytest.mark.parametrize("which", ["bundled", "gpt2-small"])
@run_async
async def test_the_walk_starts_at_the_model_files_with_what_safetensors_reports(which, size, bundled_trace, small_trace, ckpts):
    trace, path = (bundled_trace, bundled_dir()) if which == "bundled" else (small_trace, ckpts.path("gpt2-small"))
    n, data = safetensors_report(path / "model.safetensors")
    n_layer = trace.n_layer
    app = make_app(trace=trace)
    async with app.run_test(size=size) as pilot:
        screen = await step_screen(app, pilot)
        assert screen.stage == Stage("model_files") and screen.index == 0
        text = stage_text(app)
        flat = " ".join(text.split())  # lines wrapped at 80 columns read as one
        assert f"{count(n)} tensors in all" in text and f"data {count(data)} B" in flat
        assert re.search(rf"{count(n)} tensors in all +{count(data)}\n", text)  # the total row
        assert f"h.0 … h.{n_layer - 1}: {n_layer} blocks of 12 tensors each" in flat
        assert re.search(rf"^  n_layer +{n_layer}\b", text, re.M)  # config.json's row
        assert "LM head: not stored; the logits use wte (tied)" in flat
        assert "merges        50,000" in text and "<|endoftext|> (id 50256)" in text
        parameters = 12 * n_layer + 4
        # F16 converted into float32; F32 used as read, and the stage says why it is read, not mapped.
        in_place = 0 if which == "bundled" else parameters
        assert f"read into memory: {in_place} of {parameters} used as read" in flat
        # The header is the JSON the file's first 8 bytes give the length of (8,480 B for tiny's, not 8,488).
        json_bytes = int.from_bytes((path / "model.safetensors").read_bytes()[:8], "little")
        assert f"then the header, {count(json_bytes)} B" in flat
        assert f"header 8 B + {count(json_bytes)} B" in flat  # the picture counts it as the words do
        assert ("cannot pull the weights from under it" in flat) is (which != "bundled")
        width = app.screen.query_one(ModelFilesPicture).size.width
        assert all(cell_len(line) <= width for line in picture_lines(app, ModelFilesPicture))


@run_async
async def test_an_older_trace_shows_its_config_and_says_the_files_were_not_recorded():
    trace = load(TINY_TRACE)  # recorded before gpt2viz kept the files' facts
    assert trace.model_files is None
    for language, said in (("en", "recorded before gpt2viz kept what the files hold"), ("zh", "还没有保存这些文件的内容")):
        set_language(language)
        app = make_app(trace=trace)
        async with app.run_test(size=(80, 24)) as pilot:
            await step_screen(app, pilot)
            text = stage_text(app)
            assert said in text and "n_ctx" in text and "128" in text
            assert "h.0 …" not in text and "wte.weight" not in text  # no tensor table
            assert "config.json · model.safetensors · " in text  # the map still names the files


def test_a_replay_says_its_files_were_loaded_by_the_run_that_recorded_it(bundled_trace):
    for language, live, replayed in (("en", "Before the model reads a single token", "When this trace was recorded"),
                                     ("zh", "在模型读入第一个 token 之前，gpt2viz 先从", "录制这份 trace 时")):
        set_language(language)
        here = narrate(bundled_trace, Stage("model_files"), generate_key="g").text
        saved = narrate(bundled_trace, Stage("model_files"), generate_key="g", replay=True).text
        assert live in here and replayed not in here
        assert replayed in saved and live not in saved
        assert here.split("\n\n")[1:] == saved.split("\n\n")[1:]  # the same facts after the lead


# Stage kind -> the words of the map's highlighted rows (English).
HIGHLIGHTED = {
    "model_files": ["config.json"],
    "tokenize": ["Tokenize"],
    "embed": ["Embed"],
    "ln1": ["block", "ln_1", "× "],
    "qkv": ["block", "attention:", "× "],
    "pattern": ["block", "attention:", "× "],
    "attn_out": ["block", "+ attention output", "× "],
    "mlp": ["block", "MLP:", "× "],
    "mlp_out": ["block", "+ MLP output", "× "],
    "ln_final": ["ln_f"],
    "lm_head": ["LM head"],
    "logit_lens": ["ln_f", "LM head"],
    "next_token": ["Next token"],
}


# Every stage's map again at 120 x 40 (which row is highlighted does not depend on the size): the slow tier.
@pytest.mark.parametrize("size", [pytest.param((80, 24), id="80x24"), pytest.param((120, 40), marks=pytest.mark.slow, id="120x40")])
@run_async
async def test_the_map_opens_from_every_stage_with_its_stage_highlighted(size, bundled_trace):
    app = make_app(trace=bundled_trace)
    async with app.run_test(size=size) as pilot:
        screen = await step_screen(app, pilot)
        for i in stages_in_blocks(screen.stages, {3}):
            stage = screen.stages[i]
            screen.go_to(i)
            await pilot.pause()
            await pilot.press("o")
            await pilot.pause()
            assert isinstance(app.screen, ModelMapScreen)
            lines = picture_lines(app, ModelMap)
            marked = [line for line in lines if line.startswith("›")]
            for words in HIGHLIGHTED.get(stage.kind, []):
                assert any(words in line for line in marked), (stage.key, words, marked)
            if stage.layer is not None:
                assert "block 3 of 7 blocks (0–6), each the same:" in marked[0]
            box = app.screen.query_one("#map-box")
            width = app.screen.query_one(ModelMap).size.width
            assert all(cell_len(line) <= width for line in lines), lines
            assert box.max_scroll_y == 0, (size, stage.key)  # the whole map in sight
            await pilot.press("o")  # the same key closes it
            await pilot.pause()
            assert app.screen is screen and screen.index == i


def test_the_map_has_this_model_s_sizes(bundled_trace, small_trace):
    for trace, n_layer, C, T in ((bundled_trace, 7, 112, 5), (small_trace, 12, 768, 12)):
        text = "\n".join(line.plain for line in map_lines(trace, Stage("mlp", 2), 100))
        assert f"x [1, {T}, {C}]" in text and f"logits [1, {T}, 50257]" in text
        assert f"block 2 of {n_layer} blocks (0–{n_layer - 1})" in text and f"× {n_layer} blocks" in text
        assert f"MLP: {C} → {4 * C} → {C}" in text


@run_async
async def test_the_map_key_is_in_the_help_the_side_panel_and_the_palette(bundled_trace):
    app = make_app(trace=bundled_trace)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await step_screen(app, pilot)
        rows = dict(key_rows(screen))
        assert rows["o"].startswith("The map of the model")
        assert str(screen.query_one("#side-panel").border_title) == "o: map · m: cost lab"
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert "The map of the model" in app.screen.query_one("#help-text").content.plain
        await pilot.press("escape")
        await pilot.pause()
        # One entry in the palette, the key's (a provider of its own listed the map a second time):
        # every provider the palette asks on this screen, searched for "map".
        providers = {*type(app).COMMANDS, *type(screen).COMMANDS}
        assert KeyCommands in providers
        found = [hit for provider in providers async for hit in provider(screen).search("map")]
        found = [hit for hit in found if "map" in str(hit.text).lower()]
        assert [str(hit.text) for hit in found] == [rows["o"]]
        ran = found[0].command()
        if ran is not None:  # the key's action, run as the palette runs it
            await ran
        await pilot.pause()
        assert isinstance(app.screen, ModelMapScreen)


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
@run_async
async def test_the_stage_and_the_map_in_chinese_have_no_english_and_the_same_numbers(size, small_trace):
    allowed = run_words(small_trace)
    shown = {}
    for language in ("en", "zh"):
        set_language(language)
        app = make_app(trace=small_trace)
        async with app.run_test(size=size) as pilot:
            screen = await step_screen(app, pilot)
            stage = stage_text(app)
            screen.go_to(index_of(screen.stages, "heads", 4))
            await pilot.pause()
            await pilot.press("o")
            await pilot.pause()
            box = app.screen.query_one("#map-box")
            the_map = "\n".join([str(box.border_title), *picture_lines(app, ModelMap)])
            assert box.max_scroll_y == 0, language
            shown[language] = (stage, the_map)
    for english, chinese in zip(shown["en"], shown["zh"]):
        assert english_words(chinese, allowed) == [], chinese
        assert Counter(NUMBER.findall(chinese)) == Counter(NUMBER.findall(english))


def test_a_stored_lm_head_and_mask_buffers_are_said_in_both_languages(ckpts, tmp_path):
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    directory = tmp_path / "with-extras"
    shutil.copytree(ckpts.path("tiny"), directory)
    tensors = load_file(str(directory / "model.safetensors"))
    prefix = "transformer." if any(k.startswith("transformer.") for k in tensors) else ""
    tensors["lm_head.weight"] = tensors[prefix + "wte.weight"].clone()
    for layer in range(2):
        tensors[f"{prefix}h.{layer}.attn.bias"] = torch.tril(torch.ones(1, 1, 8, 8, dtype=torch.bool))
    save_file(tensors, str(directory / "model.safetensors"))
    trace = trace_prompt(gpt2viz.load_model(str(directory)), "Hello")
    english = narrate(trace, Stage("model_files"), generate_key="g").text
    assert "also stores lm_head.weight, a copy of wte" in english and "2 tensors are causal masks" in english
    set_language("zh")
    chinese = narrate(trace, Stage("model_files"), generate_key="g").text
    assert "lm_head.weight" in chinese and "因果掩码" in chinese
    assert english_words(chinese, run_words(trace)) == []
    assert Counter(NUMBER.findall(chinese)) == Counter(NUMBER.findall(english))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "int8"])
def test_what_a_format_holds_beyond_its_parameters_is_said_in_both_languages(dtype):
    """A model that holds more than its parameters take in its format (packed copies, padding,
    int8's scales; in float32, the LM head's float16 copy where this machine chose one for the
    bundled model's table of float16 numbers) says how much more, and how much of it a decode step
    reads; a float32 model without that copy holds just its parameters and says nothing of the kind."""
    lm = gpt2viz.load_model(str(bundled_dir()), dtype=dtype)
    trace = trace_prompt(lm, "Hello")
    english = narrate(trace, Stage("model_files"), generate_key="g").text
    plain = lm.n_params * {"float32": 4, "bfloat16": 2, "float16": 2, "int8": 1}[dtype]
    extra = lm.weight_bytes - plain
    held = any(c.kernel == "fbgemm float16" for c in lm.kernels)
    assert (extra > 0) is (dtype != "float32" or held)
    assert (f"That is {count(extra)} B" in english) is (extra > 0), english
    assert ("the LM head multiplies by a float16 copy of the table" in english) is held
    if extra > 0:
        assert f"A decode step reads {count(lm.step_weight_bytes)} B" in english
    if dtype in ("bfloat16", "float16"):  # the head's own copy is named where its kernel keeps one
        head = [c.kernel for c in lm.format_kernels if c.product == "head"]
        assert ("a packed copy of the token table for the LM head" in english) is (head != ["plain 16-bit"])
    if extra > 0:
        set_language("zh")  # tests/conftest.py sets English again after each test
        chinese = narrate(trace, Stage("model_files"), generate_key="g").text
        assert f"多出 {count(extra)} B" in chinese
        assert Counter(NUMBER.findall(chinese)) == Counter(NUMBER.findall(english))


@pytest.mark.parametrize("added, said", [
    (1, "50,257 tokens: 256 to start from (for GPT-2, the 256 byte values), 50,000 merges"),
    # GPT-2's own files list <|endoftext|> in the vocabulary, not as an added token (issue 36: "257
    # to start from (... the 256 byte values)" on such a checkpoint).
    (0, "50,257 tokens: 257 to start from (the 256 byte values and 1 more that no merge makes), 50,000 merges"),
])
def test_the_tokenizer_sentence_counts_what_the_vocabulary_starts_from(added, said):
    from gpt2viz.tui.file_facts import TokenizerFacts
    from gpt2viz.tui.model_files_narration import _tokenizer

    text = _tokenizer(TokenizerFacts((), "BPE", 50257, 50000, added, ()))
    assert said in text


def test_the_kernels_this_machine_chose_are_said_in_both_languages():
    """The Model files stage says, per weight shape, which kernel the recording machine chose and
    why (gpt2viz.kernels): what the trace records, whatever the machine; nothing for another format."""
    lm = gpt2viz.load_model(str(bundled_dir()))
    trace = trace_prompt(lm, "Hello")
    doc = trace.to_dict()
    recorded = doc["model"]["kernels"]
    assert [p["layers"] for p in recorded["products"]] == [
        ["attn.c_attn"], ["attn.c_proj"], ["mlp.c_fc"], ["mlp.c_proj"], ["lm_head"]
    ]
    # Every sentence, whichever this machine's choices are: one product per reason.
    for p, reason in zip(doc["model"]["kernels"]["products"], ["faster", "slower", "other digits", "odd width", "one thread"]):
        p.update(reason=reason, kernel="two-core split" if reason == "faster" else "plain",
                 max_rows=8 if reason == "faster" else 0, plain_us=120.0, split_us=61.5, partial_us=None, busy=True)
        p.pop("held_us", None)  # the float16 copy, where this machine timed one: not among these sentences
    doc["model"]["kernels"]["cpu"] = "Some CPU; avx2"
    shown = Trace.from_dict(doc)
    english = narrate(shown, Stage("model_files"), generate_key="g").text
    assert "measured on the machine that ran this (Some CPU; avx2)" in english
    assert "or the weight's two halves on one core each." in english and "float16 copy" not in english  # none timed
    assert "• attn.c_attn (112 × 336): two halves, 61.5 µs against 120 µs as one product (one row)." in english
    assert "• attn.c_proj (112 × 112): one product, 120 µs against 61.5 µs in two halves (one row)." in english
    assert "• mlp.c_fc (112 × 448): one product; in two halves this CPU's BLAS adds in another order" in english
    assert "• mlp.c_proj (448 × 112): one product; its halves would not be whole SIMD vectors." in english
    assert "• lm_head (112 × 50,257): one product; with one thread there is nothing to split over." in english
    assert "Other programs kept the CPUs busy while these were timed" in english
    set_language("zh")
    chinese = narrate(shown, Stage("model_files"), generate_key="g").text
    assert "拆成两半，61.5 微秒" in chinese and "重新计时" in chinese
    assert Counter(NUMBER.findall(chinese)) == Counter(NUMBER.findall(english))
    set_language("en")
    # The partial sums (chosen only where the plain product keeps no digits for them to change).
    doc["model"]["kernels"]["products"][0].update(kernel="two-core partial sums", partial_us=40.2)
    shown = Trace.from_dict(doc)
    english = narrate(shown, Stage("model_files"), generate_key="g").text
    assert ("• attn.c_attn (112 × 336): the weight's rows in two halves, a partial sum on each core, then added: "
            "40.2 µs against 120 µs as one product (one row).") in english
    assert english.count("Partial sums add each output's terms in another order") == 1  # said once, not per line
    # Thousands separated, as every other number (a learner read '1518 µs against 14317 µs').
    doc["model"]["kernels"]["products"][1].update(plain_us=14317.2, split_us=1518.4)
    english = narrate(Trace.from_dict(doc), Stage("model_files"), generate_key="g").text
    assert "one product, 14,317 µs against 1,518 µs in two halves" in english
    set_language("zh")
    chinese = narrate(shown, Stage("model_files"), generate_key="g").text
    assert "各算一个部分和，再相加：40.2 微秒" in chinese and chinese.count("部分和相加的顺序") == 1
    set_language("en")
    # Another format: its kernels are its format's (kernels/formats.py), one line a weight shape.
    other = trace_prompt(gpt2viz.load_model(str(bundled_dir()), dtype="bfloat16"), "Hello")
    assert other.to_dict()["model"]["kernels"]["products"] == []
    assert "measured on the machine" not in narrate(other, Stage("model_files"), generate_key="g").text


def test_a_formats_kernels_are_said_in_both_languages():
    """A bfloat16 model's Model files stage says which kernel each weight shape got and why, with
    the recorded timings; int8's say how wide its inputs are quantized. Every reason, both languages."""
    doc = trace_prompt(gpt2viz.load_model(str(bundled_dir()), dtype="bfloat16"), "Hello").to_dict()
    recorded = doc["model"]["kernels"]["formats"]
    assert [c["dtype"] for c in recorded] == ["bfloat16"] * len(recorded) and recorded[-1]["layers"] == ["lm_head"]
    for c, (kernel, reason) in zip(recorded, [("oneDNN packed", "fastest"), ("fbgemm float16", "only kernel"),
                                              ("plain 16-bit", "only kernel"), ("fbgemm float16", "set by GPT2VIZ_KERNELS")]):
        c.update(kernel=kernel, reason=reason, busy=reason == "fastest",
                 timed_us={"fbgemm float16": 29.2, "oneDNN packed": 22.4} if reason == "fastest" else {})
    doc["model"]["kernels"]["cpu"] = "Some CPU; avx512_bf16"
    english = narrate(Trace.from_dict(doc), Stage("model_files"), generate_key="g").text
    assert "In bfloat16, the kernel for each weight was chosen on the machine that ran this (Some CPU; avx512_bf16)" in english
    assert ("• attn.c_attn (112 × 336): oneDNN's packed weights, the fastest here at one row "
            "(fbgemm's float16-weight product 29.2 µs, oneDNN's packed weights 22.4 µs).") in english
    assert "• attn.c_proj (112 × 112): fbgemm's float16-weight product, the only kernel here that holds this weight exactly" in english
    assert "• mlp.c_fc (112 × 448): the plain 16-bit product, the only one here that holds this weight" in english
    assert "• mlp.c_proj (448 × 112): fbgemm's float16-weight product, the first kernel that holds it, as GPT2VIZ_KERNELS" in english
    assert "Other programs kept the CPUs busy while these were timed" in english
    set_language("zh")
    chinese = narrate(Trace.from_dict(doc), Stage("model_files"), generate_key="g").text
    assert "bfloat16 下每个权重用哪个内核" in chinese and "oneDNN 的打包权重 22.4 微秒" in chinese and "重新计时" in chinese
    assert Counter(NUMBER.findall(chinese)) == Counter(NUMBER.findall(english))
    set_language("en")
    int8 = trace_prompt(gpt2viz.load_model(str(bundled_dir()), dtype="int8"), "Hello").to_dict()
    kinds = {c["reason"] for c in int8["model"]["kernels"]["formats"]}
    assert len(kinds) == 1 and kinds <= {"8-bit inputs", "7-bit inputs"}
    for reason, said in (("8-bit inputs", "inputs quantized to 8 bits"), ("7-bit inputs", "inputs quantized to 7 bits")):
        for c in int8["model"]["kernels"]["formats"]:
            c["reason"] = reason
        text = narrate(Trace.from_dict(int8), Stage("model_files"), generate_key="g").text
        assert "In int8 every product multiplies 8-bit weights through fbgemm" in text
        assert f"• lm_head (112 × 50,257): {said}" in text
