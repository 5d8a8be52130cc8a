"""Bounded, seeded fuzzing: every malformed input ends in a clean gpt2viz error or a valid result.

Never a traceback of another kind, never a hang. Hypothesis runs with a fixed seed (derandomize)
and a bounded number of examples, so CI stays well under a minute for this file.
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpt2viz.errors import ConfigError, Gpt2VizError, WeightsError
from gpt2viz.model.config import GPT2Config
from gpt2viz.model.weights import load_weights
from gpt2viz.trace import TraceFileError, dumps, load, trace_prompt
from gpt2viz.trace.recorder import prepare_prompt

FUZZ = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=8)

CONFIG_KEYS = [
    "n_layer", "n_head", "n_embd", "n_positions", "n_ctx", "vocab_size", "layer_norm_epsilon",
    "activation_function", "n_inner", "model_type", "eos_token_id", "scale_attn_weights",
    "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn",
]


@FUZZ
@given(overrides=st.dictionaries(st.sampled_from(CONFIG_KEYS), json_values, max_size=4))
def test_config_fields(overrides):
    raw = {"n_layer": 2, "n_head": 4, "n_embd": 64, "n_positions": 128, "vocab_size": 50257}
    raw.update(overrides)
    try:
        config = GPT2Config.from_dict(raw)
    except ConfigError as err:
        assert str(err).startswith("config.json:")
        return
    assert config.n_embd % config.n_head == 0 and config.n_layer >= 1


@pytest.fixture(scope="module")
def weights_bytes(tiny_dir) -> bytes:
    return (tiny_dir / "model.safetensors").read_bytes()


def _header(data: bytes) -> tuple[int, dict]:
    (n,) = struct.unpack("<Q", data[:8])
    return n, json.loads(data[8 : 8 + n])


@FUZZ
@given(
    key=st.sampled_from(["dtype", "shape", "data_offsets", "__rename__", "__drop__"]),
    value=json_values,
    which=st.integers(min_value=0, max_value=10**6),
)
def test_safetensors_header_fields(tmp_path_factory, tiny_dir, weights_bytes, key, value, which):
    n, header = _header(weights_bytes)
    names = sorted(k for k in header if k != "__metadata__")
    name = names[which % len(names)]
    if key == "__drop__":
        del header[name]
    elif key == "__rename__":
        header[str(value)[:40]] = header.pop(name)
    else:
        header[name][key] = value
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    _expect_clean_load(tmp_path_factory, tiny_dir, struct.pack("<Q", len(raw)) + raw + weights_bytes[8 + n :])


@FUZZ
@given(position=st.integers(min_value=0, max_value=4096), junk=st.binary(min_size=1, max_size=16), cut=st.booleans())
def test_safetensors_byte_mutations(tmp_path_factory, tiny_dir, weights_bytes, position, junk, cut):
    data = weights_bytes[:position] if cut else weights_bytes[:position] + junk + weights_bytes[position + len(junk) :]
    _expect_clean_load(tmp_path_factory, tiny_dir, data)


def _expect_clean_load(tmp_path_factory, tiny_dir: Path, data: bytes) -> None:
    d = tmp_path_factory.mktemp("fuzz")
    shutil.copy(tiny_dir / "config.json", d)
    (d / "model.safetensors").write_bytes(data)
    config = GPT2Config.from_file(d / "config.json")
    try:
        loaded = load_weights(d, config)
    except WeightsError:
        return
    # Accepted: every tensor has the shape the config implies.
    assert loaded.tensors["wte.weight"].shape == (config.vocab_size, config.n_embd)


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prompt=st.text(max_size=60))
def test_prompts(tiny_lm, prompt):
    ids, notices = prepare_prompt(tiny_lm, prompt)
    assert ids and all(0 <= i < tiny_lm.config.vocab_size for i in ids)
    assert tiny_lm.tokenizer.decode(tiny_lm.tokenizer.encode(prompt)) == prompt
    for i in ids:
        tiny_lm.tokenizer.display(i)
    if len(prompt) < 12:
        trace = trace_prompt(tiny_lm, prompt)
        assert len(trace.tokens) == len(ids)


@pytest.fixture(scope="module")
def trace_doc(tiny_lm) -> dict:
    return json.loads(dumps(trace_prompt(tiny_lm, "Hi there", generate_tokens=2)))


def _paths(doc, prefix=()):
    """Every (path) inside a JSON document, depth-first, capped for speed."""
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in list(doc.items())[:12]:
            out += _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:3]):
            out += _paths(v, prefix + (i,))
    return out


@FUZZ
@given(data=st.data())
def test_trace_files_for_replay(tmp_path_factory, trace_doc, data):
    doc = json.loads(json.dumps(trace_doc))
    paths = [p for p in _paths(doc) if p]
    path = data.draw(st.sampled_from(paths))
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    if data.draw(st.booleans()):
        if isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent.pop(path[-1])
    else:
        parent[path[-1]] = data.draw(json_values)
    target = tmp_path_factory.mktemp("replay") / "t.json"
    target.write_text(json.dumps(doc))
    try:
        trace = load(target)
    except TraceFileError as err:
        assert str(target) in str(err)
        return
    assert trace.tokens and trace.events


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.binary(max_size=200))
def test_trace_files_of_random_bytes(tmp_path_factory, raw):
    target = tmp_path_factory.mktemp("replay") / "t.json"
    target.write_bytes(raw)
    with pytest.raises(Gpt2VizError):
        load(target)
