"""What the loader records about a checkpoint's files (gpt2viz/model/files.py, a trace's
`model_files`): the tensors and bytes are what the `safetensors` library reports for the file, the
settings what config.json says, the tokenizer what its files hold; a stored LM head and mask
buffers are told apart, and how the weights were read (mapped, used in place or copied) is measured."""

from __future__ import annotations

import json
import shutil
import sys

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

import gpt2viz
from gpt2viz.model.files import BUFFER, CONFIG_KEYS, LM_HEAD, PARAMETER, STORED, TIED
from gpt2viz.model.sources import bundled_dir
from gpt2viz.trace import Trace, dump, load, trace_prompt


def reported_by_safetensors(path) -> tuple[int, int, dict[str, tuple[str, list[int]]]]:
    """The tensor count, their bytes together, and each tensor's dtype and shape, as the library says."""
    with safe_open(str(path), framework="pt") as f:
        names = list(f.keys())
        tensors = {name: f.get_tensor(name) for name in names}
        headers = {name: (f.get_slice(name).get_dtype(), list(f.get_slice(name).get_shape())) for name in names}
    return len(names), sum(t.nbytes for t in tensors.values()), headers


@pytest.fixture(scope="module")
def bundled():
    return gpt2viz.load_model("tiny")


def test_the_bundled_model_s_tensors_and_bytes_are_what_safetensors_reports(bundled):
    path = bundled_dir() / "model.safetensors"
    n, data, headers = reported_by_safetensors(path)
    weights = bundled.files.weights
    assert len(weights.tensors) == n == 88  # 7 blocks of 12, wte, wpe, ln_f's two
    assert sum(t.bytes for t in weights.tensors) == data
    assert {t.name: (t.dtype, list(t.shape)) for t in weights.tensors} == headers
    (file,) = weights.files
    assert file.name == "model.safetensors" and file.bytes == path.stat().st_size
    assert file.bytes - file.header_bytes == data  # the header, then the tensors' bytes and nothing else
    assert file.header_bytes == 8 + int.from_bytes(path.read_bytes()[:8], "little")
    assert {t.role for t in weights.tensors} == {PARAMETER} and weights.lm_head == TIED
    assert sum(t.bytes // 2 for t in weights.tensors) == bundled.n_params  # F16: 2 bytes a number


def test_the_config_and_tokenizer_records_are_what_the_files_hold(bundled):
    directory = bundled_dir()
    raw = json.loads((directory / "config.json").read_text())
    config = bundled.files.config
    assert config.file.bytes == (directory / "config.json").stat().st_size
    assert config.values == {key: raw[key] for key in CONFIG_KEYS if key in raw}
    assert config.values["n_positions"] == bundled.config.n_ctx and config.values["n_inner"] is None
    assert config.other_count == len(raw) - len(config.values) and "architectures" in config.other_keys
    doc = json.loads((directory / "tokenizer.json").read_text())
    tokenizer = bundled.files.tokenizer
    assert tokenizer.model == "BPE" and tokenizer.merges == len(doc["model"]["merges"]) == 50_000
    assert tokenizer.vocab_size == 50_257 and tokenizer.added == 1
    assert tokenizer.special_tokens == ((50256, "<|endoftext|>"),)
    assert [(f.name, f.bytes) for f in tokenizer.files] == [("tokenizer.json", (directory / "tokenizer.json").stat().st_size)]


def test_how_the_weights_were_read_is_measured(bundled, ckpts):
    """gpt2viz reads the tensors into memory of its own, never leaving them in a mapping of the file
    (a file rewritten under the app must not take its weights away: test_hostile_inputs): F16 in
    the file, float32 in the model: every tensor converted. F32 run in float32: every tensor used as
    read. The same file in bfloat16: converted again."""
    linux = sys.platform.startswith("linux")
    assert bundled.files.weights.in_place == 0
    assert bundled.files.weights.mapped is (False if linux else None)
    small = ckpts.lm("gpt2-small")
    weights = small.files.weights
    parameters = [t for t in weights.tensors if t.role == PARAMETER]
    assert len(parameters) == 12 * 12 + 4 == weights.in_place
    assert weights.mapped is (False if linux else None)
    n, data, _headers = reported_by_safetensors(ckpts.path("gpt2-small") / "model.safetensors")
    assert len(weights.tensors) == n and sum(t.bytes for t in weights.tensors) == data
    half = gpt2viz.load_model(str(ckpts.path("tiny")), dtype="bfloat16")
    assert half.files.weights.in_place == 0


def test_a_stored_lm_head_and_mask_buffers_are_recorded_for_what_they_are(ckpts, tmp_path):
    directory = tmp_path / "with-extras"
    shutil.copytree(ckpts.path("tiny"), directory)
    tensors = load_file(str(directory / "model.safetensors"))
    prefix = "transformer." if any(k.startswith("transformer.") for k in tensors) else ""
    tensors["lm_head.weight"] = tensors[prefix + "wte.weight"].clone()
    tensors[prefix + "h.0.attn.bias"] = torch.tril(torch.ones(1, 1, 4, 4, dtype=torch.bool))
    tensors[prefix + "h.0.attn.masked_bias"] = torch.tensor(-1e4)
    save_file(tensors, str(directory / "model.safetensors"))
    lm = gpt2viz.load_model(str(directory))
    weights = lm.files.weights
    roles = {t.name: t.role for t in weights.tensors}
    assert roles["lm_head.weight"] == LM_HEAD and weights.lm_head == STORED
    assert roles[prefix + "h.0.attn.bias"] == roles[prefix + "h.0.attn.masked_bias"] == BUFFER
    bias = next(t for t in weights.tensors if t.name == prefix + "h.0.attn.bias")
    assert (bias.dtype, bias.bytes) == ("BOOL", 16)
    n, data, _headers = reported_by_safetensors(directory / "model.safetensors")
    assert len(weights.tensors) == n and sum(t.bytes for t in weights.tensors) == data
    assert weights.in_place == sum(1 for t in weights.tensors if t.role == PARAMETER)  # F32, float32: used as read


def test_vocab_and_merges_files_give_the_same_tokenizer_record(ckpts, tmp_path):
    from tokenizers import Tokenizer as HFTokenizer

    directory = tmp_path / "pair"
    shutil.copytree(ckpts.path("tiny"), directory)
    doc = json.loads((directory / "tokenizer.json").read_text())
    (directory / "vocab.json").write_text(json.dumps(doc["model"]["vocab"]))
    merges = [m if isinstance(m, str) else " ".join(m) for m in doc["model"]["merges"]]
    (directory / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n")
    (directory / "tokenizer.json").unlink()
    record = gpt2viz.load_model(str(directory)).files.tokenizer
    assert [f.name for f in record.files] == ["vocab.json", "merges.txt"]
    assert record.merges == len(merges) and record.vocab_size == HFTokenizer.from_str(json.dumps(doc)).get_vocab_size()


def test_a_trace_keeps_the_record_and_an_older_trace_reads_without_it(ckpts, tmp_path):
    lm = ckpts.lm("tiny")
    trace = trace_prompt(lm, "Hello")
    assert trace.model_files == lm.files.to_dict()
    path = tmp_path / "trace.json"
    dump(trace, path)
    assert json.loads(path.read_text())["model_files"]["weights"]["tensors"][0].keys() == {
        "name", "file", "dtype", "shape", "bytes", "role"}
    assert load(path).model_files == trace.model_files
    doc = trace.to_dict()
    del doc["model_files"]
    assert Trace.from_dict(doc).model_files is None


def test_a_hub_model_s_files_are_recorded_as_a_local_one_s(tmp_path):
    """Through the real hub client (against tests/hub_server.py): the snapshot's files are links
    into the cache's blobs, and the record names the files and counts the tensors all the same."""
    import os
    import subprocess

    from hub_server import HubServer, Repo

    out = tmp_path / "trace.json"
    with HubServer({"org/tiny": Repo.from_dir(bundled_dir())}) as hub:
        env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_DISABLE_TELEMETRY": "1",
               "NO_PROXY": "127.0.0.1"}
        env.pop("HF_HUB_OFFLINE", None)
        result = subprocess.run([sys.executable, "-m", "gpt2viz", "--model", "org/tiny", "--json", str(out)], env=env,
                                capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    doc = json.loads(out.read_text())
    assert doc["model"]["source"]["kind"] == "hub"
    files = doc["model_files"]
    n, data, _headers = reported_by_safetensors(bundled_dir() / "model.safetensors")
    assert [f["name"] for f in files["weights"]["files"]] == ["model.safetensors"]
    assert len(files["weights"]["tensors"]) == n and sum(t["bytes"] for t in files["weights"]["tensors"]) == data
    assert files["weights"]["mapped"] is (False if sys.platform.startswith("linux") else None)  # through the link
    assert [f["name"] for f in files["tokenizer"]["files"]] == ["tokenizer.json"] and files["tokenizer"]["merges"] == 50_000
