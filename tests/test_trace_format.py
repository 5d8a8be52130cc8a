"""One definition of the trace format: docs/trace.schema.json says what each field may be on its
own, and `gpt2viz.trace.load` refuses exactly what the schema refuses, plus what breaks one of the
cross-field rules docs/trace.md lists (a field against the config or another field, which JSON
Schema cannot say).

Real dumps (a prompt, generations, batches, a decode step, the cost lab, a long prompt, the traces
in tests/data) are mutated one field at a time: every field path, a few elements of each list.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
from pathlib import Path

import jsonschema
import pytest

from test_gguf import written  # noqa: F401 (the fixture: a small LLaMA GGUF file)
import gpt2viz
import trace_schema
from gpt2viz.errors import TraceError
from gpt2viz.interventions import Ablation
from gpt2viz.trace import dumps, load, trace_decode_step, trace_prompt, validate

REPO = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((REPO / "docs" / "trace.schema.json").read_text(encoding="utf-8"))
DOC = (REPO / "docs" / "trace.md").read_text(encoding="utf-8")
DATA = REPO / "tests" / "data"
# jsonschema, the reference validator of draft 2020-12: the oracle trace_schema is checked against.
REFERENCE = jsonschema.Draft202012Validator(SCHEMA)


# -- real dumps ----------------------------------------------------------------------------------


def _one_head_checkpoint(directory: Path) -> Path:
    """A 1-block, 1-head, 8-wide GPT-2 with 80 positions, stored in bfloat16 with an LM head of
    its own and mask buffers (as older checkpoints have them): long prompts (pooled attention
    maps, a prompt cut to the context, a generation stopped by it) in a small trace."""
    import torch
    from safetensors.torch import save_file
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=1, n_head=1, n_embd=8, n_positions=80)
    model = GPT2LMHeadModel(config).eval()
    tensors = {name: t.detach().to(torch.bfloat16).clone() for name, t in model.state_dict().items()
               if not name.endswith((".attn.bias", ".attn.masked_bias"))}
    tensors["transformer.h.0.attn.bias"] = torch.ones(1, 1, 80, 80, dtype=torch.bool).tril()
    tensors["transformer.h.0.attn.masked_bias"] = torch.tensor(-1e4)
    save_file(tensors, str(directory / "model.safetensors"), metadata={"format": "pt"})
    config.to_json_file(directory / "config.json")
    shutil.copy(REPO / "assets" / "tokenizer" / "tokenizer.json", directory / "tokenizer.json")
    return directory


def _doc(trace) -> dict:
    return json.loads(dumps(trace))


def _cost_lab(lm, ids: list[int]) -> dict:
    """The cost lab's three experiments, as `--cost-lab` records them, at a small scale."""
    from gpt2viz import cost_lab

    result = cost_lab.new_result(lm)
    result.context = cost_lab.context_sweep(lm, ids, len(ids) + 6, points=3, reps=1)
    result.batch = cost_lab.batch_sweep(lm, ids, context=8, sizes=(1, 2), steps=1)
    result.precision_formats = cost_lab.precision_sweep(lm, ids, context=8, formats=("float32", "int8"), steps=1)
    return result.to_dict()


@pytest.fixture(scope="module")
def dumps_by_name(tiny_lm, ckpts, tmp_path_factory, written) -> dict[str, dict]:  # noqa: F811
    from gpt2viz.generate import SamplingSettings

    from test_cli_errors import gpt2viz as run_cli

    code, stderr, out = run_cli("The meaning of life is", "--model", "tiny", "--json", "-", "--generate", "3",
                                "--topk-logits", "3", "--temperature", "0.7", "--seed", "4")
    assert code == 0, stderr
    lm = tiny_lm
    docs = {
        "prompt": _doc(trace_prompt(lm, "Hello there, world", topk=3, ablations=[Ablation.parse("L1H2")])),
        "sampled": _doc(trace_prompt(lm, "Hi", generate_tokens=3, topk=3,
                                     settings=SamplingSettings(0.8, top_k=5, top_p=0.9, seed=1))),
        "greedy, no cache": _doc(trace_prompt(lm, "Hi", generate_tokens=2, topk=3, use_cache=False)),
        "sequences": _doc(trace_prompt(lm, "Hi", generate_tokens=2, topk=3, sequences=2,
                                       settings=SamplingSettings(1.0, seed=3))),
        "batch prompts": _doc(trace_prompt(lm, "Hi", generate_tokens=2, topk=3, batch_prompts=["Once upon"])),
        "decode step": _doc(trace_decode_step(lm, lm.tokenizer.encode("Hi there"), topk=3)),
        "empty prompt": _doc(trace_prompt(lm, "", topk=3)),
    }
    low = gpt2viz.load_model(str(ckpts.path("tiny")), device="cpu", dtype="bfloat16")
    lab = trace_prompt(low, "Hi you", topk=3, quality=True)
    lab.cost_lab = _cost_lab(low, lab.all_token_ids)
    docs["cost lab, bfloat16"] = _doc(lab)
    small = gpt2viz.load_model(str(_one_head_checkpoint(tmp_path_factory.mktemp("one-head"))), device="cpu")
    long_ids = [(i * 7919) % 50000 for i in range(90)]
    docs["prompt cut, pooled maps"] = _doc(trace_prompt(small, long_ids, topk=2))
    docs["generation cut"] = _doc(trace_prompt(small, long_ids[:77], generate_tokens=5, topk=2))
    llama = gpt2viz.load_model(str(written[0]))  # a small LLaMA-family GGUF file (tests/test_gguf.py)
    docs["llama, gguf"] = _doc(trace_prompt(llama, "the the", generate_tokens=2, topk=3))
    docs["bundled model, command line"] = json.loads(out)  # last: the fields it shares with the others are tried there
    for path in sorted(DATA.glob("*.json")):
        docs[path.name] = json.loads(path.read_text(encoding="utf-8"))
    return docs


# -- walking a document --------------------------------------------------------------------------


def _json_type(value) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer", float: "number",
            type(None): "null"}[type(value)]


def walk(node, path=()):
    """(path, value) of `node` and of everything in it."""
    yield path, node
    if type(node) is dict:
        for key, value in node.items():
            yield from walk(value, path + (key,))
    elif type(node) is list:
        for i, value in enumerate(node):
            yield from walk(value, path + (i,))


def general(doc: dict, path: tuple) -> str:
    """A path with list indices left out ('generation.steps[].raw.ids[]'); an event is named by
    its kind of stage ('events[blocks.{i}.attn.hook_pattern]'), a stored tensor by its role."""
    parts, node = [], doc
    for key in path:
        if type(key) is int:
            if len(parts) == 1 and parts[0] == "events":
                event = node[key]
                kind = re.sub(r"\d+", "{i}", str(event.get("stage")))
                parts.append(f"[{kind}{' reduced' if event.get('reduced') else ''}]")
            elif parts[-1] == ".tensors":
                parts.append(f"[{node[key].get('role')}]")
            else:
                parts.append("[]")
        else:
            parts.append(("." if parts else "") + key)
        node = node[key]
    return "".join(parts)


def sample_paths(docs: dict[str, dict]) -> list[tuple[str, tuple, str]]:
    """(dump, path, general path) for the first and last place of each kind of field (by its
    general path and JSON type) in the first dump that has it."""
    seen: dict[tuple[str, str], list] = {}
    for name, doc in docs.items():
        taken = set()
        for path, value in list(walk(doc))[1:]:
            key = (general(doc, path), _json_type(value))
            if key in seen and key not in taken:
                continue
            taken.add(key)
            places = seen.setdefault(key, [])
            places[1:] = [(name, path, key[0])]  # the first, and the latest
    return [place for places in seen.values() for place in places]


# -- mutations -----------------------------------------------------------------------------------

# A mutation changes one field: its type, its value, its length; a key gone or one added. Where
# the schema refuses it, the loader must too. Where the schema accepts it, every field is still
# what it may be on its own, so the loader may refuse it only for a cross-field rule (a length set
# by the config, a row's sum, an id against vocab_size, 7.0 for 7): its error must then name one of
# the rules docs/trace.md lists (checks.RuleBroken), and each of those rules must be needed.


def mutations(value, in_object: bool):
    """(name, new value) for each mutation of `value`; DELETE removes the key."""
    if in_object:
        yield "deleted", DELETE
    if value is not None:
        yield "null", None
    if type(value) is bool:
        yield "an integer", int(value)
        yield "a string", "true"
    elif type(value) is int:
        yield "a string", str(value)
        yield "negative", -1 - value
        yield "beyond 2^53", 10**16
        yield "a fraction", value + 0.5
        yield "written as a float", float(value)
        yield "plus one", value + 1
        if value > 0:
            yield "minus one", value - 1
    elif type(value) is float:
        yield "a string", str(value)
        yield "negative", -abs(value) - 1.0
        yield "beyond 1e15", 1e16
        yield "more than 1", 1.5
        yield "halved", value / 2 if value else 0.5
        yield "zero", 0.0
    elif type(value) is str:
        yield "a number", 5
        yield "unknown", "banana"
        yield "an empty string", ""
        yield "5,000 characters", "x" * 5000
    elif type(value) is list:
        yield "an object", {}
        yield "an empty list", []
        if value:
            yield "without its last entry", value[:-1]
            yield "its first entry twice", [copy.deepcopy(value[0])] + value
    elif type(value) is dict:
        yield "a list", []
        yield "with an unknown key", {**value, "unknown_field": 1}
    else:  # null
        yield "a string", "null"
        yield "an object", {}
        yield "zero", 0


DELETE = object()


def set_at(doc: dict, path: tuple, new):
    """Puts `new` at `path` (DELETE: removes the key) and returns how to undo it."""
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    key = path[-1]
    old = parent[key]
    if new is DELETE:
        del parent[key]
    else:
        parent[key] = new

    def undo():
        parent[key] = old

    return undo


def cross_field_rules() -> set[str]:
    """The rules docs/trace.md lists under "Cross-field rules": `**name**` at the start of an item."""
    section = DOC.split("### Cross-field rules", 1)[1].split("\n#", 1)[0]
    return set(re.findall(r"^- \*\*([a-z-]+)\*\*", section, flags=re.M))


# The schema judges each event on its own, and the rest of the document apart from the events: so
# a mutated event is judged by the event's schema alone, and a mutation elsewhere with the events
# cut to one, which is the whole document's verdict since the rest of it is valid
# (test_the_schema_judges_each_event_on_its_own checks the premises).
REFERENCE_EVENT = REFERENCE.evolve(schema=SCHEMA["$defs"]["event"])


def schema_accepts(doc: dict, path: tuple, reference: bool = False) -> bool:
    """The schema's verdict on `doc`, whose only change is at `path` (by jsonschema: `reference`)."""
    is_event, is_doc = (REFERENCE_EVENT.is_valid, REFERENCE.is_valid) if reference else (
        trace_schema.event_is_valid, trace_schema.is_valid)
    if path[0] == "events":
        return is_event(doc["events"][path[1]]) if len(path) >= 2 else is_doc(doc)
    return is_doc({**doc, "events": doc["events"][:1]})


def load_verdict(doc: dict) -> tuple[bool, str | None, str]:
    """Whether the loader accepts `doc`, and if not, the cross-field rule it names and its message."""
    try:
        validate(doc)
    except TraceError as err:
        return False, getattr(err, "rule", None), str(err)
    return True, None, ""


def compare(docs: dict[str, dict], places=None):
    """Every mutation of every sampled field: (disagreements, {rule: mutations only it refused},
    the number of mutations)."""
    rules = cross_field_rules()
    disagreements, used, n = [], {}, 0
    for name, path, field in places if places is not None else sample_paths(docs):
        doc = docs[name]
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        for what, new in mutations(parent[path[-1]], type(parent) is dict):
            undo = set_at(doc, path, new)
            try:
                schema_ok = schema_accepts(doc, path)
                load_ok, rule, message = load_verdict(doc)
            finally:
                undo()
            n += 1
            if schema_ok == load_ok:
                continue
            if not schema_ok:
                disagreements.append(f"{field} {what} ({name}): the schema refuses it, load accepts it")
            elif rule in rules:
                used.setdefault(rule, []).append(f"{field} {what}")
            else:
                disagreements.append(f"{field} {what} ({name}): load refuses it, rule {rule}: {message}")
    return disagreements, used, n


def test_every_dump_is_valid_for_the_schema_and_the_loader(dumps_by_name):
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    for name, doc in dumps_by_name.items():
        errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in REFERENCE.iter_errors(doc)]
        assert errors == [], (name, errors[:5])
        validate(doc)


def test_the_schema_judges_each_event_on_its_own(dumps_by_name):
    """The premises of `schema_accepts`: `events` checks each item on its own and nothing else in
    the schema looks into the events; and on a sample of mutations, its verdicts are those of the
    whole document."""
    assert set(SCHEMA["properties"]["events"]) <= {"type", "minItems", "maxItems", "items", "description"}
    assert "events" not in json.dumps({k: v for k, v in SCHEMA.items() if k in ("if", "then", "else", "allOf")})
    places = sample_paths({"prompt": dumps_by_name["prompt"], "sampled": dumps_by_name["sampled"]})
    checked = 0
    for doc, path, new in mutated(dumps_by_name, places[::20]):
        assert schema_accepts(doc, path) == trace_schema.is_valid(doc), (path, new)
        checked += 1
    assert checked > 150


def mutated(docs: dict[str, dict], places):
    """(doc, path, new value) for every mutation of each place, the doc changed while it is
    looked at and restored after."""
    for name, path, _ in places:
        doc = docs[name]
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        for _, new in mutations(parent[path[-1]], type(parent) is dict):
            undo = set_at(doc, path, new)
            try:
                yield doc, path, new
            finally:
                undo()


def test_the_compiled_schema_judges_as_jsonschema_does(dumps_by_name):
    """trace_schema (fastjsonschema, drafts 4-7) gives draft 2020-12's verdict: on every valid dump
    and on a sample of mutations of every kind of field of two dumps, jsonschema agrees."""
    for name, doc in dumps_by_name.items():
        assert trace_schema.is_valid(doc), name
    places = sample_paths({"prompt": dumps_by_name["prompt"], "sampled": dumps_by_name["sampled"]})
    refused = checked = 0
    for doc, path, new in mutated(dumps_by_name, places[::7]):
        verdict = schema_accepts(doc, path)
        assert verdict == schema_accepts(doc, path, reference=True), (path, new)
        checked += 1
        refused += not verdict
    assert checked > 400 and refused > 100


@pytest.mark.slow  # every mutation of every trace kind: 3,000+ documents checked by both (9 s)
def test_the_schema_and_the_loader_refuse_the_same_mutations(dumps_by_name):
    from gpt2viz.trace.checks import RULES

    assert cross_field_rules() == set(RULES), "docs/trace.md lists the rules load checks"
    disagreements, used, n = compare(dumps_by_name)
    assert n > 3000
    assert disagreements == [], "\n".join(disagreements)
    assert set(used) == cross_field_rules(), f"rules no mutation needed: {cross_field_rules() - set(used)}"


def test_load_judges_a_file_as_validate_judges_its_document(dumps_by_name, tmp_path):
    """`compare` asks `validate`, which is what `load` runs on the document it parsed."""
    doc = dumps_by_name["sampled"]
    path = tmp_path / "mutated.json"
    checked = 0
    for name, where, _ in sample_paths({"sampled": doc})[::25]:
        parent = doc
        for key in where[:-1]:
            parent = parent[key]
        for _, new in mutations(parent[where[-1]], type(parent) is dict):
            undo = set_at(doc, where, new)
            try:
                path.write_text(json.dumps(doc), encoding="utf-8")
                expected = load_verdict(doc)[0]
            finally:
                undo()
            try:
                load(path)
            except TraceError:
                assert not expected, where
            else:
                assert expected, where
            checked += 1
    assert checked > 30


# -- what docs/trace.md says ---------------------------------------------------------------------

# The sections that describe the fields, without the code blocks.
FIELD_SECTIONS = re.sub(r"```.*?```", "", DOC.split("## Reading a trace", 1)[0], flags=re.S)
# Backticked names in those sections that are not fields: code and tensor names, placeholders,
# index letters, a command's argument.
NOT_FIELDS = {"PATH", "PROMOTED_TOKENS", "n", "l", "null", "L3", "L3H5"}  # n, l: indices the text names
# Values of fields that no dump here holds (the others are found in the dumps: stage names, kinds).
UNSEEN_VALUES = {"eos", "hub_unreachable", "non_finite_weights", "tensor", "F64", "Unigram", "WordLevel"}


def documented_names() -> set[str]:
    """Names in backticks in docs/trace.md's field sections: `heads[h][i][j]` names `heads`,
    `weights.files[i].name` (or `…files[i].name`) `weights`, `files` and `name`."""
    names = set()
    for quoted in re.findall(r"`([^`]+)`", FIELD_SECTIONS):
        path = quoted.lstrip("…")
        if "gpt2viz" in path or re.search(r"\.(json|txt|py|md|safetensors)$", path):
            continue  # code, and files
        if re.fullmatch(r"[A-Za-z_]\w*(\[[^\]]*\])*(\.[A-Za-z_]\w*(\[[^\]]*\])*)*", path):
            names.update(re.sub(r"\[[^\]]*\]", "", part) for part in path.split("."))
    return names


def keys_and_words(docs) -> tuple[set[str], set[str]]:
    """Every key of the dumps, and every word of their strings ('blocks.0.attn.hook_q' gives 'hook_q')."""
    keys, words = set(), set()
    for doc in docs:
        for path, value in walk(doc):
            if path and type(path[-1]) is str:
                keys.add(path[-1])
            if type(value) is str and len(value) < 100:
                words.update(re.split(r"[.+/]", value))
    return keys, words


def test_every_field_of_a_dump_is_documented_and_every_documented_field_is_in_a_dump(dumps_by_name):
    keys, words = keys_and_words(dumps_by_name.values())
    documented = documented_names()
    assert sorted(keys - documented) == [], "fields no section of docs/trace.md names"
    unseen = documented - keys - words
    assert sorted(unseen - NOT_FIELDS - UNSEEN_VALUES) == [], "names docs/trace.md gives that no dump has"
    assert sorted((NOT_FIELDS | UNSEEN_VALUES) - unseen) == [], "listed as unseen, but not documented or seen"


def schema_properties(node=SCHEMA) -> set[str]:
    """Every property name the schema defines."""
    names = set()
    if type(node) is dict:
        for key, value in node.items():
            if key == "properties" and type(value) is dict:
                names.update(value)
            names |= schema_properties(value)
    elif type(node) is list:
        for value in node:
            names |= schema_properties(value)
    return names


def test_every_field_the_schema_defines_is_in_a_dump(dumps_by_name):
    """Nothing the schema allows is left unexercised by the mutations (notices' parameters apart:
    they are the templates' placeholders)."""
    from gpt2viz.trace.checks import notice_parameters

    keys, _ = keys_and_words(dumps_by_name.values())
    params = {name for names in notice_parameters().values() for name in names}
    assert sorted(schema_properties() - keys - params) == []
    said = {branch["properties"]["code"]["const"]: set(branch["properties"]["params"]["properties"])
            for branch in SCHEMA["$defs"]["notice"]["oneOf"]}
    assert said == {code: set(names) for code, names in notice_parameters().items()}


def test_floats_are_rounded_and_number_formats_named_as_documented(dumps_by_name):
    """docs/trace.md: floats to 6 significant digits (settings and the config as they were
    given); `stored_dtype` in the names `dtype` uses, a GGUF file's block formats in GGUF's."""
    formats = {"float64", "float32", "bfloat16", "float16"}
    for name, doc in dumps_by_name.items():
        if name.endswith(".json"):
            continue  # written by an earlier gpt2viz
        if doc["model"]["source"]["kind"] == "gguf":
            assert doc["model"]["stored_dtype"] == "F32+Q4_1+Q8_0"
        else:
            assert set(doc["model"]["stored_dtype"].split("+")) <= formats
        for path, value in walk(doc):
            given = path[:2] == ("model", "config") or "settings" in path or path[:1] == ("model_files",)
            if type(value) is float and not given:
                assert float(f"{value:.6g}") == value, (name, path, value)
