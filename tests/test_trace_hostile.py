"""A replayed trace is untrusted input: `gpt2viz.trace.load` is the one check it passes, and it
refuses, with the field named, what the recorder could not have written: sizes beyond the
documented limits, shapes that disagree with the trace's own config, numbers outside their
meaning. Every trace the recorder writes still loads. Each hostile trace here is a real dump of
the bundled model, edited by hand."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path

import pytest

import gpt2viz
from gpt2viz.errors import TraceError
from gpt2viz.trace import dumps, load, trace_decode_step, trace_prompt
from gpt2viz.trace.document import CONFIG_LIMITS, MAX_FILE_BYTES, MAX_TOPK
from helpers import state_home

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"
SCHEMA = json.loads((REPO / "docs" / "trace.schema.json").read_text(encoding="utf-8"))
PROMPT = "The meaning of life is"  # 5 tokens


@pytest.fixture(scope="module")
def lm():
    return gpt2viz.load_model("tiny")


@pytest.fixture(scope="module")
def real(lm) -> dict:
    """A real dump: 5 positions, 7 blocks of 8 heads, 3 generated tokens."""
    return json.loads(dumps(trace_prompt(lm, PROMPT, generate_tokens=3)))


def event_of(doc: dict, stage: str) -> tuple[int, dict]:
    for i, event in enumerate(doc["events"]):
        if event["stage"] == stage:
            return i, event
    raise KeyError(stage)


def field_of(doc: dict, stage: str) -> str:
    """How an error names the event of `stage`."""
    return f"events[{event_of(doc, stage)[0]}] ({stage})"


def refusal(tmp_path: Path, doc: dict | str) -> TraceError:
    path = tmp_path / "hostile.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc), encoding="utf-8")
    with pytest.raises(TraceError) as caught:
        load(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    return caught.value


def schema_rejects(doc: dict) -> bool:
    import trace_schema

    return not trace_schema.is_valid(doc)


# -- each class of hostile trace ------------------------------------------------------------------
# (edit of the real dump, the field the error must name, what the message says, whether the
# published schema can say it too: it cannot compare a size with the config)

def _pattern(doc):
    return event_of(doc, "blocks.3.attn.hook_pattern")[1]


def _logits(doc):
    return event_of(doc, "unembed.hook_out")[1]


def _lens(doc):
    return event_of(doc, "logit_lens")[1]


def _set(path: str, value):
    """An edit that sets the field at `path` ('model.config.n_layer', 'tokens.0.id') to `value`."""
    def edit(doc):
        *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
        for p in parents:
            doc = doc[p]
        doc[last] = value
    return edit


SIZES = [
    (_set("model.config.n_layer", 10**7), "model.config.n_layer", f"from 1 to {CONFIG_LIMITS['n_layer']}", True),
    (_set("model.config.n_head", 4096), "model.config.n_head", "got 4096", True),
    (_set("model.config.vocab_size", 10**9), "model.config.vocab_size", "got 1000000000", True),
    (_set("model.config.n_ctx", 2**40), "model.config.n_ctx", "from 1 to", True),
    (lambda d: _logits(d)["positions"][0].update({k: d and _logits(d)["positions"][0][k] * 101 for k in ("ids",)}),
     "(unembed.hook_out).positions[0].ids", f"at most {MAX_TOPK}", True),
    (lambda d: d["generation"]["steps"].extend(copy.deepcopy(d["generation"]["steps"][:1]) * 300),
     "generation.steps", "at most n_ctx = 256", False),
    (lambda d: d.update(tokens=d["tokens"] * 60), "tokens", "at most n_ctx - len(context) = 256", False),
]

SHAPES = [
    (lambda d: _pattern(d)["heads"][2].append(_pattern(d)["heads"][2][0]),
     "(blocks.3.attn.hook_pattern).heads[2]", "6 entries, expected T = 5", False),
    (lambda d: _pattern(d)["heads"][2][3].pop(), "(blocks.3.attn.hook_pattern).heads[2][3]", "expected L = 5", False),
    (lambda d: _pattern(d)["heads"].pop(), "(blocks.3.attn.hook_pattern).heads", "expected n_head = 8", False),
    (lambda d: event_of(d, "blocks.1.hook_resid_post")[1]["mlp_update_norms"].append(1.0),
     "(blocks.1.hook_resid_post).mlp_update_norms", "expected T = 5", False),
    (lambda d: _lens(d)["layers"].append(_lens(d)["layers"][0]), "(logit_lens).layers", "expected n_layer = 7", False),
    (lambda d: d["events"].remove(_pattern(d)), "events", "no blocks.3.attn.hook_pattern event", False),
    (lambda d: _pattern(d).pop("shape"), "(blocks.3.attn.hook_pattern).shape", "missing", True),
    (lambda d: _pattern(d).update(shape=[1, 8, 5, 6]), "(blocks.3.attn.hook_pattern).shape",
     "must be [1, 8, 5, 5] ([1, n_head, T, L])", False),
    (lambda d: _pattern(d).update(stage="blocks.9.attn.hook_pattern", layer=9), "].stage",
     "not a stage of this trace's model", False),
    (lambda d: d["events"].__setitem__(event_of(d, "blocks.2.attn.hook_pattern")[0], copy.deepcopy(_pattern(d))),
     "].stage", "blocks.3.attn.hook_pattern appears twice", False),
    (lambda d: _pattern(d).update(layer=99), "(blocks.3.attn.hook_pattern).layer", "got 99", False),
    (lambda d: event_of(d, "kv_cache")[1]["layers"].pop(), "(kv_cache).layers", "expected n_layer = 7", False),
    (lambda d: _logits(d)["positions"][1]["tokens"].pop(), "(unembed.hook_out).positions[1].tokens",
     "expected len(ids) = 10", False),
    (lambda d: d["generation"]["ids"].pop(), "generation.ids", "expected len(steps) = 3", False),
]

NUMBERS = [
    (lambda d: _logits(d)["positions"][0]["probs"].__setitem__(0, 1.5), "(unembed.hook_out).positions[0].probs[0]",
     "from 0 to 1 or null, got 1.5", True),
    (lambda d: _logits(d)["positions"][0]["probs"].__setitem__(9, -0.01), "(unembed.hook_out).positions[0].probs[9]",
     "got -0.01", True),
    (lambda d: _pattern(d)["heads"][2].__setitem__(4, [v / 2 for v in _pattern(d)["heads"][2][4]]),
     "(blocks.3.attn.hook_pattern).heads[2][4]", "sums to 0.5", False),
    (lambda d: _logits(d)["positions"][2]["probs"].__setitem__(1, 0.99), "(unembed.hook_out).positions[2].probs",
     "probabilities of one softmax sum to 1", False),
    (lambda d: _logits(d)["positions"][2]["probs"].reverse(), "(unembed.hook_out).positions[2].probs",
     "most likely first", False),
    (_set("tokens.0.id", True), "tokens[0].id", "got true", True),  # JSON's words, not Python's
    (_set("tokens.0.id", None), "tokens[0].id", "got null", True),
    # JSON Schema's "integer" takes 7.0: only load tells them apart.
    (_set("model.config.n_layer", 7.0), "model.config.n_layer", "got 7.0", False),
    (_set("tokens.0.id", 50257), "tokens[0].id", "from 0 to 50256, got 50257", False),
    (lambda d: _logits(d)["positions"][0]["ids"].__setitem__(3, -1), "(unembed.hook_out).positions[0].ids[3]",
     "got -1", True),
    (_set("generation.steps.1.id", 10**6), "generation.steps[1].id", "from 0 to 50256", False),
    (lambda d: _lens(d)["layers"][2].update(final_rank=0), "(logit_lens).layers[2].final_rank", "got 0", True),
    (lambda d: _lens(d).update(final_id=60000), "(logit_lens).final_id", "got 60000", False),
    (_set("timings.forward_ms", 1e308), "timings.forward_ms", "got 1e+308", True),
    (_set("model.weight_bytes", 1e308), "model.weight_bytes", "got 1e+308", True),
    (_set("model.n_params", 10**30), "model.n_params", "got 1000000000000000000000000000000", True),
    (_set("generation.ttft_ms", "fast"), "generation.ttft_ms", "got 'fast'", True),
    (_set("generation.settings.top_p", 7), "generation.settings.top_p", "got 7", True),
    (_set("generation.stop_reason", "banana"), "generation.stop_reason", "got 'banana'", True),
    (_set("generation.others_cpu", 1.5), "generation.others_cpu", "got 1.5", True),  # a share: at most all CPUs
    (_set("generation.settings.top_p", 0.0), "generation.settings.top_p", "(0, 1]", True),  # as SamplingSettings
    (_set("generation.settings.greedy", False), "generation.settings.greedy", "temperature == 0", True),
    (lambda d: d["generation"].update(steps=[], ids=[], stop_reason="eos"), "generation.steps", "must not be empty", True),
    (_set("model.dtype", "float64"), "model.dtype", "got 'float64'", True),
    (lambda d: event_of(d, "hook_embed")[1]["norms"].__setitem__(2, -3.0), "(hook_embed).norms[2]", "got -3.0", True),
    (lambda d: d.update(interventions=["L99"]), "interventions[0]", "blocks 0 to 6", False),
    (lambda d: d.update(notices=[{"code": "prompt_cut", "params": {"tokens": 1e300, "n_ctx": 256}}]),
     "notices[0].params.tokens", "got 1e+300", False),
    # The sampling cuts' reach: a nucleus larger than the vocabulary, nuclei that shrink as p grows.
    (lambda d: _logits(d)["sampling"]["top_p"][1].update(tokens=10**6), "(unembed.hook_out).sampling.top_p[1].tokens",
     "from 1 to 50257", False),
    (lambda d: _logits(d)["sampling"]["top_p"].reverse(), "(unembed.hook_out).sampling.top_p", "must not decrease", False),
]


@pytest.mark.parametrize("edit, field, says, in_schema", SIZES + SHAPES + NUMBERS)
def test_a_hostile_trace_is_refused_naming_the_field(tmp_path, real, edit, field, says, in_schema):
    doc = copy.deepcopy(real)
    edit(doc)
    err = refusal(tmp_path, doc)
    assert field in err.field and field in str(err)
    assert says in str(err)
    if in_schema:  # the published schema refuses it too
        assert schema_rejects(doc), "docs/trace.schema.json accepts what load refuses"


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_literals_are_refused(tmp_path, real, literal):
    text = json.dumps(real).replace('"forward_ms":', f'"forward_ms":{literal},"x":', 1)
    assert literal in text
    err = refusal(tmp_path, text)
    assert f"{literal} is not a JSON number" in str(err)


def test_a_number_too_large_for_a_double_is_refused_naming_the_field(tmp_path, real):
    doc = copy.deepcopy(real)
    event_of(doc, "hook_pos_embed")[1]["sum_norms"][1] = 12345.0
    text = json.dumps(doc).replace("12345.0", "1e999")  # Python reads it as inf
    err = refusal(tmp_path, text)
    assert err.field == f"{field_of(doc, 'hook_pos_embed')}.sum_norms[1]" and "got inf" in str(err)


def test_an_integer_of_thousands_of_digits_is_refused(tmp_path, real):
    text = json.dumps(real).replace('"n_params":', '"n_params":' + "9" * 5000 + ',"x":', 1)
    assert "thousands of digits" in str(refusal(tmp_path, text))


def test_a_config_of_absurd_size_is_refused_before_anything_is_built(tmp_path, real):
    """A few-KB trace claiming 10**7 blocks used to cost gigabytes: now a bound is checked first."""
    doc = copy.deepcopy(real)
    doc["model"]["config"]["n_layer"] = 10**7
    tracemalloc.start()
    try:
        refusal(tmp_path, doc)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 * 1024**2


# -- files that are no trace ---------------------------------------------------------------------


def _peak_while_refusing(path) -> tuple[TraceError, int]:
    tracemalloc.start()
    try:
        with pytest.raises(TraceError) as caught:
            load(path)
        return caught.value, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_file_over_the_limit_is_refused_without_reading_it(tmp_path):
    big = tmp_path / "big.json"
    with open(big, "wb") as f:  # sparse: takes no disk
        f.truncate(MAX_FILE_BYTES + 1)
    err, peak = _peak_while_refusing(big)
    assert "more than a trace may hold" in str(err) and f"{MAX_FILE_BYTES:,}" in str(err)
    assert peak < 1024**2, f"{peak} bytes allocated to refuse it"


@pytest.mark.parametrize("unit", [b"{},", b'"ab",'])
def test_a_file_of_tiny_objects_or_strings_is_refused_before_parsing(tmp_path, unit):
    """An empty object is 3 bytes in the file and 64 once parsed: the counts are checked first."""
    from gpt2viz.trace.document import MAX_CONTAINERS, MAX_QUOTES

    n = MAX_CONTAINERS + 1 if unit == b"{}," else MAX_QUOTES // 2 + 1
    bomb = tmp_path / "bomb.json"
    bomb.write_bytes(b"[" + unit * n + b"0]")
    err, peak = _peak_while_refusing(bomb)
    assert "lists and objects" in str(err) and "more than a trace may hold" in str(err)
    assert peak < 1.5 * bomb.stat().st_size, "parsed it, or held more than one copy of its bytes"


@pytest.mark.skipif(not Path("/dev/zero").is_char_device(), reason="needs /dev/zero")
def test_dev_zero_is_refused_without_reading_it():
    err, peak = _peak_while_refusing("/dev/zero")
    assert "not a regular file" in str(err)
    assert peak < 1024**2


def test_a_directory_is_refused(tmp_path):
    assert "is a directory" in str(_peak_while_refusing(tmp_path)[0])


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_with_no_writer_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    script = textwrap.dedent(
        f"""
        from gpt2viz.trace import load
        from gpt2viz.errors import TraceError
        try:
            load({str(fifo)!r})
        except TraceError as err:
            print(err)
        """
    )
    # Blocking on the FIFO would hang until the timeout: the generous bound is not a speed test.
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "not a regular file" in proc.stdout


# -- on the command line -----------------------------------------------------------------------


def _in_a_terminal(args: list[str], tmp_path: Path, prelude: str = "") -> subprocess.CompletedProcess:
    """gpt2viz `args`, its keys read from a pseudo-terminal, stderr captured."""
    import pty

    main, child = pty.openpty()
    script = prelude + "\nimport sys\nfrom gpt2viz.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    env = {**os.environ, "XDG_STATE_HOME": str(state_home(tmp_path / "state")), "TERM": "xterm-256color"}
    try:
        return subprocess.run(
            [sys.executable, "-c", script, *args], stdin=child, stdout=child, stderr=subprocess.PIPE,
            text=True, timeout=120, env=env,
        )
    finally:
        os.close(main)
        os.close(child)


@pytest.mark.parametrize("what", ["shape", "/dev/zero"])
def test_replay_of_a_hostile_trace_is_one_line_and_exit_1(tmp_path, real, what):
    if what == "/dev/zero":
        path, field = "/dev/zero", "not a regular file"
    else:
        doc = copy.deepcopy(real)
        _pattern(doc)["heads"].pop()
        path = tmp_path / "hostile.json"
        path.write_text(json.dumps(doc), encoding="utf-8")
        field = f"{field_of(doc, 'blocks.3.attn.hook_pattern')}.heads has 7 entries, expected n_head = 8"
    proc = _in_a_terminal(["--replay", str(path)], tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"gpt2viz: error: {path}: ") and field in proc.stderr


def test_a_bug_in_a_screen_ends_the_replay_with_exit_1_and_one_line(tmp_path, real):
    """Whatever passes load and still breaks a screen (a bug) ends the app with exit status 1 and
    one line naming the log that holds the traceback: never exit 0, never a traceback on screen."""
    path = tmp_path / "real.json"
    path.write_text(json.dumps(real), encoding="utf-8")
    prelude = textwrap.dedent(
        """
        from gpt2viz.tui.screens import step
        def broken(self, *args, **kwargs):
            raise RuntimeError("a screen that breaks")
        step.StepScreen.on_mount = broken
        """
    )
    proc = _in_a_terminal(["--replay", str(path)], tmp_path, prelude)
    log = tmp_path / "state" / "gpt2viz" / "errors.log"
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert f"unexpected error, a bug in gpt2viz: RuntimeError: a screen that breaks (traceback in {log})" in proc.stderr
    assert "a screen that breaks" in log.read_text(encoding="utf-8")


# -- every real trace still loads ------------------------------------------------------------------


def _round_trip(tmp_path: Path, trace) -> dict:
    path = tmp_path / "real.json"
    path.write_text(dumps(trace), encoding="utf-8")
    back = load(path)
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert back.to_dict() == doc
    assert not schema_rejects(doc)
    return doc


@pytest.mark.parametrize("positions", [1, 5, 64])
def test_every_trace_the_recorder_writes_still_loads(tmp_path, lm, positions):
    ids = lm.tokenizer.encode((REPO / "assets" / "tiny" / "heldout.txt").read_text(encoding="utf-8"))[:positions]
    doc = _round_trip(tmp_path, trace_prompt(lm, ids, generate_tokens=4))
    assert len(doc["tokens"]) == positions and len(doc["generation"]["steps"]) == 4


@pytest.mark.parametrize(
    "kind",
    ["sampled", "no cache", "sequences", "batch prompts", "ablated", "empty prompt", "decode step", "long", "bfloat16",
     "non-finite weights"],
)
def test_traces_of_every_kind_still_load(tmp_path, lm, kind):
    from gpt2viz.interventions import parse_ablations

    if kind == "sampled":
        trace = trace_prompt(lm, PROMPT, generate_tokens=5, topk=3,
                             settings=gpt2viz.SamplingSettings(0.8, top_k=20, top_p=0.9, seed=2))
    elif kind == "no cache":
        trace = trace_prompt(lm, PROMPT, generate_tokens=3, use_cache=False)
    elif kind == "sequences":
        trace = trace_prompt(lm, PROMPT, generate_tokens=3, sequences=3)
    elif kind == "batch prompts":
        trace = trace_prompt(lm, PROMPT, generate_tokens=3, batch_prompts=["Once upon a time", "Hi"])
    elif kind == "ablated":
        trace = trace_prompt(lm, PROMPT, generate_tokens=3, ablations=tuple(parse_ablations(["L0H1", "L2.mlp:mean", "L3.n1,2"])))
    elif kind == "empty prompt":
        trace = trace_prompt(lm, "")
    elif kind == "decode step":
        trace = trace_decode_step(lm, lm.tokenizer.encode(PROMPT + " not"))
    elif kind == "long":  # past the whole-map length: maps averaged down, last rows kept
        words = (REPO / "assets" / "tiny" / "heldout.txt").read_text(encoding="utf-8")
        trace = trace_prompt(lm, lm.tokenizer.encode(words)[:200])
    elif kind == "bfloat16":
        trace = trace_prompt(gpt2viz.load_model("tiny", dtype="bfloat16"), PROMPT, generate_tokens=2, quality=True)
    else:  # statistics the recorder writes as null
        import torch

        broken = gpt2viz.load_model("tiny")
        with torch.no_grad():
            broken.model.wte.weight[464, :3] = float("nan")  # "The", the prompt's first token
        trace = trace_prompt(broken, PROMPT)
    doc = _round_trip(tmp_path, trace)
    if kind == "non-finite weights":
        assert None in event_of(doc, "hook_embed")[1]["norms"]


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("*trace*.json")))
def test_the_traces_in_tests_data_still_load(name):
    trace = load(DATA / name)
    assert trace.tokens and trace.events
