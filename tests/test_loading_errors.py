"""Loading: stored dtypes, and the errors for configs and weights this core cannot run."""

from __future__ import annotations

import json
import pickle

import pytest
import torch

import gpt2viz
from helpers import PROMPT
from gpt2viz.errors import ConfigError, ModelSourceError, WeightsError
from gpt2viz.trace.notices import notice_text
from helpers import assert_same_logits, bare_tensors, clone_checkpoint, read_tensors


@pytest.fixture(scope="module")
def tiny_tensors(tiny_dir):
    return read_tensors(tiny_dir)


@pytest.fixture(scope="module")
def tiny_config(tiny_dir):
    return json.loads((tiny_dir / "config.json").read_text())


def load(directory, **kwargs):
    return gpt2viz.load_model(str(directory), device="cpu", **kwargs)


# --- stored dtypes ---


@pytest.mark.parametrize("stored", [torch.float16, torch.bfloat16])
def test_half_precision_files_load_as_float32(tiny_dir, tiny_tensors, tmp_path, stored):
    halved = {k: v.to(stored) for k, v in tiny_tensors.items()}
    lm = load(clone_checkpoint(tiny_dir, tmp_path / "half", halved))
    assert lm.model.dtype == torch.float32
    for name, p in lm.model.named_parameters():
        assert p.dtype == torch.float32, name
        assert torch.equal(p, halved["transformer." + name].float()), name
    logits, _ = lm.model(torch.tensor([lm.tokenizer.encode(PROMPT)]))
    assert logits.dtype == torch.float32 and torch.isfinite(logits).all()
    assert lm.stored_dtype == {torch.float16: "F16", torch.bfloat16: "BF16"}[stored]


@pytest.mark.parametrize("stored", [torch.float32, torch.float16])
def test_load_into_bfloat16(tiny_dir, tiny_tensors, tmp_path, stored):
    tensors = {k: v.to(stored) for k, v in tiny_tensors.items()}
    lm = load(clone_checkpoint(tiny_dir, tmp_path / "ck", tensors), dtype="bfloat16")
    assert all(p.dtype == torch.bfloat16 for p in lm.model.parameters())
    assert torch.equal(lm.model.wte.weight, tensors["transformer.wte.weight"].to(torch.bfloat16))
    ids = lm.tokenizer.encode(PROMPT)
    logits, cache = lm.model(torch.tensor([ids]), lm.model.new_cache())
    assert logits.dtype == torch.bfloat16
    assert cache.keys[0].dtype == torch.bfloat16 and cache.itemsize == 2
    out = lm.generate(PROMPT, 3)
    assert len(out.token_ids) == 3


# --- config refusals name the setting ---


@pytest.mark.parametrize(
    "change, setting",
    [
        ({"activation_function": "relu"}, "activation_function"),
        ({"activation_function": "gelu"}, "activation_function"),
        ({"n_head": 5}, "n_head"),
        ({"n_embd": 66}, "n_embd"),
        ({"scale_attn_by_inverse_layer_idx": True}, "scale_attn_by_inverse_layer_idx"),
        ({"reorder_and_upcast_attn": True}, "reorder_and_upcast_attn"),
    ],
)
def test_config_refusals_name_the_setting(tiny_dir, tiny_config, tmp_path, change, setting):
    config = {**tiny_config, **change}
    with pytest.raises(ConfigError) as err:
        load(clone_checkpoint(tiny_dir, tmp_path / "cfg", config=config))
    assert setting in str(err.value)
    if setting in ("n_head", "n_embd"):
        assert "n_embd" in str(err.value) and "n_head" in str(err.value)


def test_missing_config_is_a_config_error(tiny_dir, tmp_path):
    directory = clone_checkpoint(tiny_dir, tmp_path / "ck")
    (directory / "config.json").unlink()
    with pytest.raises(ConfigError, match="config.json"):
        load(directory)


def test_error_hierarchy():
    assert issubclass(ConfigError, ModelSourceError)
    assert issubclass(WeightsError, ModelSourceError)


# --- weights errors name the tensor ---


def test_wrong_shape_names_tensor_and_both_shapes(tiny_dir, tiny_tensors, tmp_path):
    tensors = dict(tiny_tensors)
    tensors["transformer.h.1.ln_2.weight"] = torch.ones(63)
    with pytest.raises(WeightsError) as err:
        load(clone_checkpoint(tiny_dir, tmp_path / "ck", tensors))
    msg = str(err.value)
    assert "h.1.ln_2.weight" in msg
    assert "63" in msg and "64" in msg


def test_wrong_matrix_shape(tiny_dir, tiny_tensors, tmp_path):
    tensors = dict(tiny_tensors)
    # Stored transposed ([out, in] instead of the Conv1D [in, out]).
    tensors["transformer.h.0.mlp.c_fc.weight"] = tiny_tensors["transformer.h.0.mlp.c_fc.weight"].T.contiguous()
    with pytest.raises(WeightsError) as err:
        load(clone_checkpoint(tiny_dir, tmp_path / "ck", tensors))
    msg = str(err.value)
    assert "h.0.mlp.c_fc.weight" in msg and "[256, 64]" in msg and "[64, 256]" in msg


def test_missing_tensor_is_named(tiny_dir, tiny_tensors, tmp_path):
    tensors = {k: v for k, v in tiny_tensors.items() if k != "transformer.h.1.mlp.c_fc.bias"}
    with pytest.raises(WeightsError) as err:
        load(clone_checkpoint(tiny_dir, tmp_path / "ck", tensors))
    assert "h.1.mlp.c_fc.bias" in str(err.value) and "missing" in str(err.value)


def test_missing_tensor_in_bare_naming(tiny_dir, tiny_tensors, tmp_path):
    bare = bare_tensors(tiny_tensors, 2, 128)
    del bare["wpe.weight"]
    with pytest.raises(WeightsError, match=r"wpe\.weight"):
        load(clone_checkpoint(tiny_dir, tmp_path / "ck", bare))


class _Tripwire:
    """Unpickling this creates a marker file: proof that a .bin was unpickled."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.mark.parametrize("content", ["garbage", "pickle"])
def test_pytorch_model_bin_only_is_refused_unopened(tiny_dir, tmp_path, content):
    directory = tmp_path / "bin"
    directory.mkdir()
    (directory / "config.json").write_text((tiny_dir / "config.json").read_text())
    (directory / "tokenizer.json").write_bytes((tiny_dir / "tokenizer.json").read_bytes())
    marker = tmp_path / "unpickled"
    data = b"\x00garbage, not a pickle \xff" * 10 if content == "garbage" else pickle.dumps(_Tripwire(str(marker)))
    (directory / "pytorch_model.bin").write_bytes(data)
    with pytest.raises(WeightsError) as err:
        load(directory)
    assert "safetensors" in str(err.value)
    assert "pytorch_model.bin" in str(err.value)
    assert not marker.exists()


def test_no_weights_at_all(tiny_dir, tmp_path):
    directory = tmp_path / "empty"
    directory.mkdir()
    (directory / "config.json").write_text((tiny_dir / "config.json").read_text())
    (directory / "tokenizer.json").write_bytes((tiny_dir / "tokenizer.json").read_bytes())
    with pytest.raises(WeightsError, match="safetensors"):
        load(directory)


def test_corrupt_safetensors_is_a_weights_error(tiny_dir, tmp_path):
    directory = clone_checkpoint(tiny_dir, tmp_path / "ck")
    (directory / "model.safetensors").unlink()
    (directory / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{not json")
    with pytest.raises(WeightsError):
        load(directory)


def test_untied_lm_head_is_refused(tiny_dir, tiny_tensors, tmp_path):
    tensors = dict(tiny_tensors)
    head = tiny_tensors["transformer.wte.weight"].clone()
    head[123, 4] += 0.5
    tensors["lm_head.weight"] = head
    with pytest.raises(WeightsError) as err:
        load(clone_checkpoint(tiny_dir, tmp_path / "ck", tensors))
    assert "lm_head.weight" in str(err.value)


@pytest.mark.parametrize("int_dtype", [torch.int32, torch.int64])
def test_integer_tensor_is_refused(tiny_dir, tiny_tensors, tmp_path, int_dtype):
    tensors = dict(tiny_tensors)
    tensors["transformer.h.0.ln_1.weight"] = torch.ones(64, dtype=int_dtype)
    with pytest.raises(WeightsError) as err:
        load(clone_checkpoint(tiny_dir, tmp_path / "ck", tensors))
    assert "h.0.ln_1.weight" in str(err.value)


def test_unexpected_tensor_is_refused(tiny_dir, tiny_tensors, tmp_path):
    tensors = dict(tiny_tensors)
    tensors["transformer.h.2.ln_1.weight"] = torch.ones(64)  # a third layer in a 2-layer config
    with pytest.raises(WeightsError, match=r"h\.2\.ln_1\.weight"):
        load(clone_checkpoint(tiny_dir, tmp_path / "ck", tensors))


@pytest.mark.parametrize("mask_dtype", [torch.bool, torch.uint8])
def test_mask_buffers_of_any_dtype_are_ignored(tiny_dir, tiny_tensors, tiny_lm, tmp_path, mask_dtype):
    """The causal-mask buffer is not a parameter: older writers stored it as bool or uint8."""
    bare = bare_tensors(tiny_tensors, 2, 128, mask_dtype=mask_dtype)
    lm = load(clone_checkpoint(tiny_dir, tmp_path / "ck", bare))
    ids = torch.tensor([lm.tokenizer.encode(PROMPT)])
    assert_same_logits(lm.model(ids)[0], tiny_lm.model(ids)[0])


def test_non_finite_weights_are_reported(tiny_dir, tiny_tensors, tmp_path):
    tensors = dict(tiny_tensors)
    w = tiny_tensors["transformer.h.0.attn.c_proj.weight"].clone()
    w[0, 0] = float("nan")
    tensors["transformer.h.0.attn.c_proj.weight"] = w
    lm = load(clone_checkpoint(tiny_dir, tmp_path / "ck", tensors))
    assert any("h.0.attn.c_proj.weight" in notice_text(n) for n in lm.notices)


def test_sharded_checkpoint_loads(tiny_dir, tiny_hf, tiny_lm, tmp_path):
    """save_pretrained with a small shard size writes model.safetensors.index.json + shards."""
    directory = tmp_path / "sharded"
    tiny_hf.save_pretrained(directory, safe_serialization=True, max_shard_size="4MB")
    assert (directory / "model.safetensors.index.json").is_file()
    assert not (directory / "model.safetensors").exists()
    (directory / "tokenizer.json").write_bytes((tiny_dir / "tokenizer.json").read_bytes())
    lm = load(directory)
    ids = torch.tensor([lm.tokenizer.encode(PROMPT)])
    assert_same_logits(lm.model(ids)[0], tiny_lm.model(ids)[0])
