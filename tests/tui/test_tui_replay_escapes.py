"""Every string field a replayed trace can carry reaches the screen escaped: a property over the
trace schema, so that a new field cannot leak a terminal escape (the `model.device` of a replay
once set the title, wrote the clipboard and blinked, on the first screen).

The traces: a prompt's pass with a generation, a batch and a cost-lab result, and a decode step's
pass. Each string of them gets EVIL appended wherever the loader still accepts it (a field that
must match a pattern cannot carry it); every stage, the generation view, the cost lab, the help and
the palette are then drawn and read (test_tui_text_safety.assert_clean).
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

import gpt2viz
from gpt2viz.trace import TraceFileError, load, trace_decode_step, validate
from gpt2viz.trace.jsonio import TraceError
from gpt2viz.tui.app import make_app
from gpt2viz.tui.screens.generation import GenerationScreen
from gpt2viz.tui.screens.step import StepScreen
from test_tui_text_safety import EVIL, assert_clean, settle, walk_cost_lab, walk_stages_help_and_palette
from tui_helpers import TINY_TRACE, run_async

SCHEMA = Path(__file__).resolve().parents[2] / "docs" / "trace.schema.json"


def schema_strings() -> dict[str, dict]:
    """Every string field of the schema, as a path ('.generation.steps[].text'), with its pattern,
    enum or const if it has one."""
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    defs, found = schema.get("$defs", {}), {}

    def walk(node, path: str, seen: tuple) -> None:
        if not isinstance(node, dict):
            return
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[-1]
            if name not in seen:
                walk(defs[name], path, (*seen, name))
        kind = node.get("type")
        if kind == "string" or (isinstance(kind, list) and "string" in kind):
            found[path] = {k: node[k] for k in ("pattern", "enum", "const") if k in node}
        for key, value in node.items():
            if key == "properties":
                for name, sub in value.items():
                    walk(sub, f"{path}.{name}", seen)
            elif key == "items":
                walk(value, path + "[]", seen)
            elif key == "additionalProperties":
                walk(value, path + ".*", seen)
            elif key in ("anyOf", "oneOf", "allOf"):
                for sub in value:
                    walk(sub, path, seen)

    walk(schema, "", ())
    return found


def string_leaves(doc, path: str = "", at: tuple = ()):
    """(normalised path, place) of every string in a document: '.tokens[].text', ('tokens', 3, 'text')."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from string_leaves(value, f"{path}.{key}", (*at, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield from string_leaves(value, path + "[]", (*at, i))
    elif isinstance(doc, str):
        yield path, at


def poisoned(doc: dict) -> tuple[dict, set[str]]:
    """`doc` with EVIL appended to every string the loader accepts it in (tried one field path at
    a time); the paths poisoned."""
    groups: dict[str, list[tuple]] = {}
    for path, at in string_leaves(doc):
        groups.setdefault(path, []).append(at)
    out, kept = copy.deepcopy(doc), set()
    for path, places in groups.items():
        trial = copy.deepcopy(out)
        for at in places:
            node = trial
            for step in at[:-1]:
                node = node[step]
            node[at[-1]] = node[at[-1]] + EVIL
        try:
            validate(copy.deepcopy(trial))
        except (TraceFileError, TraceError, ValueError):
            continue  # a field with a pattern or an enum: it cannot carry the escapes
        out, kept = trial, kept | {path}
    return out, kept


def matches(schema_path: str, doc_paths: set[str]) -> bool:
    pattern = re.escape(schema_path).replace(r"\.\*", r"\.[^.\[]+")
    return any(re.fullmatch(pattern, path) for path in doc_paths)


@pytest.fixture(scope="module")
def docs(tmp_path_factory):
    """A prompt's trace with a generation and a cost-lab result; one with a batch (bfloat16: its
    kernels are recorded per format); a decode step's."""
    from gpt2viz.cli import main

    where = tmp_path_factory.mktemp("replay")
    assert main(["--model", "tiny", "--json", str(where / "prompt.json"), "--generate", "3", "Hello there"]) == 0
    assert main(["--model", "tiny", "--dtype", "bfloat16", "--json", str(where / "batch.json"), "--generate", "2",
                 "--batch-prompt", "Once upon",
                 "Hello there"]) == 0
    prompt = json.loads((where / "prompt.json").read_text(encoding="utf-8"))
    batch = json.loads((where / "batch.json").read_text(encoding="utf-8"))
    prompt["cost_lab"] = json.loads(TINY_TRACE.with_name("tiny-lab-trace.json").read_text(encoding="utf-8"))["cost_lab"]
    prompt["model"]["source"] = {"kind": "local", "path": "/models/tiny"}
    prompt["notices"] = [*prompt.get("notices", []), {"code": "non_finite_weights", "params": {"tensor": "wte"}}]
    lm = gpt2viz.load_model("tiny")
    decode = trace_decode_step(lm, lm.encode_prompt("Hello there, world")).resolve_all().to_dict()
    return {"prompt": prompt, "batch": batch, "decode": decode}


def test_every_string_field_of_the_schema_is_in_a_trace_tried(docs):
    """The traces below hold every string field the schema has (but those held to a pattern, an
    enum or a constant), so a new field is tried as soon as it is written."""
    doc_paths = {path for doc in docs.values() for path, _at in string_leaves(doc)}
    missing = [p for p, rules in schema_strings().items() if not rules and not matches(p, doc_paths)]
    # Fields of config.json that a GPT-2 checkpoint leaves out or holds as other types (numbers).
    optional = {
        ".model_files.config.values.model_type", ".model_files.config.values.attn_pdrop",
        ".model_files.config.values.embd_pdrop", ".model_files.config.values.resid_pdrop",
        ".model_files.config.values.tie_word_embeddings", ".model_files.config.values.bos_token_id",
        ".model_files.config.values.eos_token_id", ".model_files.config.other_keys[]",
        ".model_files.tokenizer.special_tokens[].text", ".context[].text",
    }
    assert not [p for p in missing if p not in optional], missing


# The prompt's trace in the fast tier; the batch's and a decode step's (5 s each, the same screens
# with more fields) in the slow tier, which CI runs too.
@pytest.mark.parametrize("which", ["prompt", pytest.param("batch", marks=pytest.mark.slow),
                                   pytest.param("decode", marks=pytest.mark.slow)])
@run_async
async def test_a_replay_with_escapes_in_every_field_leaves_the_terminal_untouched(docs, which, tmp_path):
    doc, kept = poisoned(docs[which])
    assert {".prompt", ".model.device", ".model.name", ".tokens[].text"} <= kept
    path = tmp_path / "evil.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    trace = load(path)
    app = make_app(trace=trace)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await settle(pilot, StepScreen)
        await walk_stages_help_and_palette(app, pilot)
        if which == "prompt":
            await walk_cost_lab(app, pilot)
            await pilot.press("escape", "g")
            await settle(pilot, GenerationScreen)
            for key in ("left", "left", "b", "right"):
                await pilot.press(key)
                await pilot.pause()
                assert_clean(app, f"generation {key}")
