"""GGUF files (gpt2viz/model/gguf.py): a small LLaMA written here as llama.cpp writes one (its query
and key rows reordered for llama.cpp's rotary code; the MLP in Q4_1 blocks, the token table in
Q8_0, the rest in float32), read back: the metadata as a LlamaConfig, each block dequantized as
ggml defines it, the reordering undone, the model equal to transformers' LlamaForCausalLM on the
weights the file means, the tokenizer from its tokens and merges. And hostile headers refused."""

from __future__ import annotations

import struct

import pytest
import torch

from gpt2viz.errors import WeightsError
from gpt2viz.model import gguf
from gpt2viz.model.llama import load_llama_gguf

N_LAYER, N_HEAD, N_KV, HD, C, F, V = 2, 8, 2, 8, 64, 96, 288  # rows of 64 and 96: whole blocks of 32


def quantize_q4_1(x: torch.Tensor) -> tuple[bytes, torch.Tensor]:
    """ggml's Q4_1 of `x` (rows a multiple of 32 long): the bytes, and the numbers they mean."""
    blocks = x.reshape(-1, 32)
    lo, hi = blocks.min(1, keepdim=True).values, blocks.max(1, keepdim=True).values
    d = ((hi - lo) / 15).half()
    m = lo.half()
    q = ((blocks - m.float()) / d.float().clamp_min(1e-12)).round().clamp(0, 15).to(torch.uint8)
    raw = b"".join(
        d[i].numpy().tobytes() + m[i].numpy().tobytes() + bytes((q[i, :16] | (q[i, 16:] << 4)).tolist())
        for i in range(blocks.size(0))
    )
    return raw, (d.float() * q.float() + m.float()).reshape(x.shape)


def quantize_q8_0(x: torch.Tensor) -> tuple[bytes, torch.Tensor]:
    blocks = x.reshape(-1, 32)
    d = (blocks.abs().max(1, keepdim=True).values / 127).half()
    q = (blocks / d.float()).round().clamp(-127, 127).to(torch.int8)
    raw = b"".join(d[i].numpy().tobytes() + q[i].numpy().tobytes() for i in range(blocks.size(0)))
    return raw, (d.float() * q.float()).reshape(x.shape)


def llama_cpp_permute(w: torch.Tensor, n_head: int) -> torch.Tensor:
    """convert_hf_to_gguf.py's LlamaModel.permute."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _string(s: str) -> bytes:
    data = s.encode()
    return struct.pack("<Q", len(data)) + data


def _kv(key: str, value) -> bytes:
    out = _string(key)
    if isinstance(value, str):
        return out + struct.pack("<I", 8) + _string(value)
    if isinstance(value, float):
        return out + struct.pack("<If", 6, value)
    if isinstance(value, int):
        return out + struct.pack("<II", 4, value)
    kind = 8 if isinstance(value[0], str) else 5
    items = b"".join(_string(v) if kind == 8 else struct.pack("<i", v) for v in value)
    return out + struct.pack("<IIQ", 9, kind, len(value)) + items


TOKENS = [chr(c) for c in range(33, 127)] + ["Ġ", "Ġt", "he", "Ġthe", "<|endoftext|>"]
TOKENS += [f"tok{i}" for i in range(V - len(TOKENS))]


def write_gguf(path, tensors: dict[str, tuple[str, bytes, tuple[int, ...]]], metadata: dict) -> None:
    header = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(metadata))
    header += b"".join(_kv(k, v) for k, v in metadata.items())
    offset, infos, data = 0, b"", b""
    codes = {"F32": 0, "Q4_1": 3, "Q8_0": 8}
    for name, (kind, raw, shape) in tensors.items():
        infos += _string(name) + struct.pack("<I", len(shape)) + b"".join(struct.pack("<Q", d) for d in reversed(shape))
        infos += struct.pack("<IQ", codes[kind], offset)
        pad = -len(raw) % 32
        data += raw + b"\0" * pad
        offset += len(raw) + pad
    head = header + infos
    path.write_bytes(head + b"\0" * (-len(head) % 32) + data)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """A GGUF file and the checkpoint (HF names and order) of the numbers it means."""
    return write_small_gguf(tmp_path_factory.mktemp("gguf"))


def write_small_gguf(directory):
    """`directory`/small.gguf, a two-block LLaMA as llama.cpp writes one, and the numbers it means."""
    torch.manual_seed(3)
    meant: dict[str, torch.Tensor] = {}
    tensors: dict[str, tuple[str, bytes, tuple[int, ...]]] = {}

    def put(gguf_name: str, hf_name: str, w: torch.Tensor, kind: str, permute_heads: int = 0) -> None:
        stored = llama_cpp_permute(w, permute_heads) if permute_heads else w
        if kind == "Q4_1":
            raw, value = quantize_q4_1(stored)
        elif kind == "Q8_0":
            raw, value = quantize_q8_0(stored)
        else:
            raw, value = stored.float().contiguous().numpy().tobytes(), stored.float()
        tensors[gguf_name] = (kind, raw, tuple(w.shape))
        # The numbers as the checkpoint means them: the rows put back as HF orders them.
        meant[hf_name] = w if permute_heads and kind == "F32" else value

    put("token_embd.weight", "model.embed_tokens.weight", torch.randn(V, C) * 0.3, "Q8_0")
    put("output_norm.weight", "model.norm.weight", torch.rand(C) + 0.5, "F32")
    for i in range(N_LAYER):
        p, h = f"blk.{i}.", f"model.layers.{i}."
        put(p + "attn_norm.weight", h + "input_layernorm.weight", torch.rand(C) + 0.5, "F32")
        put(p + "ffn_norm.weight", h + "post_attention_layernorm.weight", torch.rand(C) + 0.5, "F32")
        put(p + "attn_q.weight", h + "self_attn.q_proj.weight", torch.randn(C, C) * 0.2, "F32", N_HEAD)
        put(p + "attn_k.weight", h + "self_attn.k_proj.weight", torch.randn(N_KV * HD, C) * 0.2, "F32", N_KV)
        put(p + "attn_v.weight", h + "self_attn.v_proj.weight", torch.randn(N_KV * HD, C) * 0.2, "Q4_1")
        put(p + "attn_output.weight", h + "self_attn.o_proj.weight", torch.randn(C, C) * 0.2, "Q4_1")
        put(p + "ffn_gate.weight", h + "mlp.gate_proj.weight", torch.randn(F, C) * 0.2, "Q4_1")
        put(p + "ffn_up.weight", h + "mlp.up_proj.weight", torch.randn(F, C) * 0.2, "Q4_1")
        put(p + "ffn_down.weight", h + "mlp.down_proj.weight", torch.randn(C, F) * 0.2, "Q4_1")
    metadata = {
        "general.architecture": "llama", "llama.block_count": N_LAYER, "llama.context_length": 64,
        "llama.embedding_length": C, "llama.feed_forward_length": F, "llama.attention.head_count": N_HEAD,
        "llama.attention.head_count_kv": N_KV, "llama.rope.freq_base": 100000.0,
        "llama.attention.layer_norm_rms_epsilon": 1e-5, "llama.vocab_size": V,
        "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": TOKENS,
        "tokenizer.ggml.merges": ["Ġ t", "h e", "Ġt he"],
        "tokenizer.ggml.token_type": [3 if t == "<|endoftext|>" else 1 for t in TOKENS],
        "tokenizer.ggml.eos_token_id": TOKENS.index("<|endoftext|>"),
        "tokenizer.ggml.bos_token_id": TOKENS.index("he"), "tokenizer.ggml.padding_token_id": TOKENS.index("Ġt"),
    }
    path = directory / "small.gguf"
    write_gguf(path, tensors, metadata)
    return path, meant


def test_the_file_is_the_model_transformers_runs_on_the_same_numbers(written):
    from transformers import LlamaConfig, LlamaForCausalLM

    path, meant = written
    ours, _tokenizer = load_llama_gguf(path)
    config = ours.config
    assert (config.n_layer, config.n_head, config.n_kv_head, config.d_mlp, config.tie_word_embeddings) == (N_LAYER, N_HEAD, N_KV, F, True)
    for name, value in meant.items():  # dequantized and put back in order, exactly
        assert torch.equal(ours.state_dict()[name], value), name
    reference = LlamaForCausalLM(LlamaConfig(
        vocab_size=V, hidden_size=C, intermediate_size=F, num_hidden_layers=N_LAYER, num_attention_heads=N_HEAD,
        num_key_value_heads=N_KV, max_position_embeddings=64, rms_norm_eps=1e-5, rope_theta=100000.0,
        tie_word_embeddings=True)).eval()
    reference.load_state_dict({**meant, "lm_head.weight": meant["model.embed_tokens.weight"]})
    ids = torch.tensor([[3, 95, 96, 97, 98, 40, 41, 7, 200, 5]])
    with torch.no_grad():
        expected = reference(ids).logits
    logits, _ = ours(ids)
    assert (logits - expected).abs().max().item() < 1e-4


def test_the_tokenizer_is_the_file_s_byte_level_bpe(written):
    _model, tokenizer = load_llama_gguf(written[0])
    ids = tokenizer.encode(" the<|endoftext|>").ids
    assert [TOKENS[i] for i in ids] == ["Ġthe", "<|endoftext|>"]
    assert tokenizer.decode(tokenizer.encode("hi the 42").ids) == "hi the 42"
    assert [TOKENS[i] for i in tokenizer.encode("42").ids] == ["4", "2"]  # digits one by one


def test_a_text_starts_and_pads_with_the_tokens_the_file_names(written):
    """TransformerLens's to_tokens puts the tokenizer's beginning-of-text token first and pads with
    its padding token: the file's tokenizer.ggml.bos_token_id and padding_token_id."""
    import gpt2viz

    lm = gpt2viz.load_model(str(written[0]))
    bos, pad, the = TOKENS.index("he"), TOKENS.index("Ġt"), TOKENS.index("Ġthe")
    assert (lm.config.bos_token_id, lm.config.pad_token_id) == (bos, pad)
    assert lm.to_tokens(" the").tolist() == [[bos, the]]
    assert lm.to_tokens([" the", " the the"]).tolist() == [[bos, the, pad], [bos, the, the]]


def test_q4_1_and_q8_0_blocks_dequantize_as_ggml_defines_them():
    x = torch.randn(4, 64)
    raw, value = quantize_q4_1(x)
    got = gguf.dequantize(torch.frombuffer(bytearray(raw), dtype=torch.uint8), "Q4_1", (4, 64))
    assert torch.equal(got, value) and (got - x).abs().max() < (x.max() - x.min()) / 15
    raw, value = quantize_q8_0(x)
    assert torch.equal(gguf.dequantize(torch.frombuffer(bytearray(raw), dtype=torch.uint8), "Q8_0", (4, 64)), value)
    w = torch.randn(N_HEAD * HD, C)
    assert torch.equal(gguf.unpermute_rotary(llama_cpp_permute(w, N_HEAD), N_HEAD), w)


@pytest.mark.parametrize("damage", ["magic", "tensors", "string", "past the end", "type"])
def test_a_hostile_header_is_one_error_before_anything_is_allocated(written, tmp_path, damage):
    data = bytearray(written[0].read_bytes())
    if damage == "magic":
        data[:4] = b"GGML"
    elif damage == "tensors":
        data[8:16] = struct.pack("<Q", 2**40)
    elif damage == "string":
        data[24:32] = struct.pack("<Q", 2**50)  # the first key's length
    elif damage == "past the end":
        data = data[: len(data) // 2]
    else:
        at = data.index(b"blk.0.ffn_up.weight") + len(b"blk.0.ffn_up.weight") + 4 + 16
        data[at : at + 4] = struct.pack("<I", 99)
    path = tmp_path / "bad.gguf"
    path.write_bytes(bytes(data))
    with pytest.raises(WeightsError):
        load_llama_gguf(path)
