"""The LLaMA-family core (gpt2viz/model/llama.py) against transformers' LlamaForCausalLM on the same
random weights: logits within 1e-4 for grouped-query ratios 1, 3 and 9, tied and untied heads;
decoding through the KV cache gives the ids a full pass over the whole text gives; the cache keeps
only the key/value heads; the hooks fire under TransformerLens's names, rotated queries included."""

from __future__ import annotations

import pytest
import torch

from gpt2viz.errors import ConfigError, WeightsError
from gpt2viz.hooks import llama_hook_names
from gpt2viz.model.llama import LlamaConfig, load_llama

SHAPES = {
    # name: (query heads, key/value heads, tied head)
    "gqa-1": (6, 6, True),  # every query head its own keys and values (as GPT-2)
    "gqa-3": (9, 3, True),  # SmolLM2-135M's grouping
    "gqa-9": (9, 1, False),  # one key/value head for all, an LM head of its own
}


def write_llama(directory, n_head: int, n_kv_head: int, tied: bool, seed: int = 0, vocab_size: int = 300, **ids):
    from transformers import LlamaConfig as HFConfig
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    config = HFConfig(
        vocab_size=vocab_size, hidden_size=8 * n_head, intermediate_size=40, num_hidden_layers=2,
        num_attention_heads=n_head, num_key_value_heads=n_kv_head, max_position_embeddings=64,
        rms_norm_eps=1e-5, rope_theta=100000.0, tie_word_embeddings=tied, **{"eos_token_id": 0, "bos_token_id": 0, **ids},
    )
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():  # larger than the initialiser's 0.02, so the blocks change the logits
        for p in model.parameters():
            p.normal_(0, 0.2)
        for layer in model.model.layers:
            layer.input_layernorm.weight.uniform_(0.5, 1.5)
            layer.post_attention_layernorm.weight.uniform_(0.5, 1.5)
        model.model.norm.weight.uniform_(0.5, 1.5)
    model.save_pretrained(directory, safe_serialization=True)
    return model


@pytest.fixture(scope="module", params=list(SHAPES))
def pair(request, tmp_path_factory):
    n_head, n_kv_head, tied = SHAPES[request.param]
    directory = tmp_path_factory.mktemp(request.param)
    reference = write_llama(directory, n_head, n_kv_head, tied)
    return reference, load_llama(directory)


IDS = torch.tensor([[5, 17, 42, 99, 3, 250, 7, 7, 18, 1, 64, 128]])


def test_logits_match_transformers(pair):
    reference, ours = pair
    with torch.no_grad():
        expected = reference(IDS).logits
    logits, _cache = ours(IDS)
    assert logits.shape == expected.shape
    assert (logits - expected).abs().max().item() < 1e-4
    assert torch.equal(logits.argmax(-1), expected.argmax(-1))


def test_decoding_through_the_cache_gives_the_whole_pass_s_logits(pair):
    _reference, ours = pair
    full, _ = ours(IDS)
    cache = ours.new_cache(reserve=IDS.size(1))
    first, _ = ours(IDS[:, :5], cache)
    steps = [ours(IDS[:, t : t + 1], cache)[0] for t in range(5, IDS.size(1))]
    stepped = torch.cat([first, *steps], dim=1)
    # Within float32's rounding, not bit for bit: a product of one row may sum in another order than
    # one of twelve (MKL on an AMD EPYC: 1.03e-5 on logits of about 3); a cache that broke would be
    # off by whole units.
    assert (stepped - full).abs().max().item() < 1e-4
    assert torch.equal(stepped.argmax(-1), full.argmax(-1))
    config = ours.config
    assert cache.keys[0].shape[1] == config.n_kv_head  # the key/value heads only
    assert cache.length == IDS.size(1)


def test_greedy_ids_with_and_without_the_cache_and_as_transformers(pair):
    reference, ours = pair
    ids = IDS[:, :4]
    naive = ids
    for _ in range(8):
        logits, _ = ours(naive)
        naive = torch.cat([naive, logits[:, -1:].argmax(-1)], dim=1)
    cache = ours.new_cache(reserve=12)
    logits, _ = ours(ids, cache)
    cached = [int(logits[0, -1].argmax())]
    for _ in range(7):
        logits, _ = ours(torch.tensor([[cached[-1]]]), cache)
        cached.append(int(logits[0, -1].argmax()))
    assert naive[0, 4:].tolist() == cached
    with torch.no_grad():
        theirs = reference.generate(ids, max_new_tokens=8, do_sample=False, pad_token_id=0)
    assert theirs[0, 4:].tolist() == cached


def test_the_hooks_fire_under_transformerlens_names_and_the_explicit_path_agrees(pair):
    _reference, ours = pair
    config = ours.config
    seen: dict[str, torch.Tensor] = {}

    def keep(name: str, value: torch.Tensor) -> None:
        seen[name] = value.clone()

    plain, _ = ours(IDS)
    with ours.hooks.subscribe("*", keep):
        logits, _ = ours(IDS)
    T = IDS.size(1)
    fired = [name for name in llama_hook_names(config.n_layer) if name in seen]
    assert fired == [n for n in llama_hook_names(config.n_layer) if n not in ("kv_cache", "sample")]
    assert seen["blocks.0.attn.hook_k"].shape == (1, config.n_kv_head, T, config.head_dim)
    assert seen["blocks.0.attn.hook_rot_q"].shape == (1, config.n_head, T, config.head_dim)
    assert seen["blocks.1.attn.hook_pattern"].shape == (1, config.n_head, T, T)
    assert torch.allclose(seen["blocks.1.attn.hook_pattern"].sum(-1), torch.ones(1, config.n_head, T))
    # Position 0 is not rotated (every angle is 0 there); position 1 is, and keeps its length.
    q, rot = seen["blocks.0.attn.hook_q"], seen["blocks.0.attn.hook_rot_q"]
    assert torch.allclose(q[:, :, 0], rot[:, :, 0]) and not torch.allclose(q[:, :, 1], rot[:, :, 1])
    assert torch.allclose(q.norm(dim=-1), rot.norm(dim=-1), atol=1e-5)
    mlp = ours.model.layers[0].mlp
    gate, up, post = (seen[f"blocks.0.mlp.{n}"] for n in ("hook_pre", "hook_pre_linear", "hook_post"))
    assert torch.allclose(post, torch.nn.functional.silu(gate) * up) and mlp is not None
    # Listening to the pattern computes attention explicitly: the same logits to rounding.
    assert (logits - plain).abs().max().item() < 1e-4


def test_a_padded_batch_matches_transformers_given_the_same_positions(pair):
    """Rows of different lengths, padded on the left: transformers told each row's positions
    (cumsum of the mask) gives the same logits at every real position, a padded row gives what it
    gives alone, and a decode step through the cache what a whole pass gives."""
    reference, ours = pair
    ids = torch.tensor([[0, 0, 0, 5, 17, 42, 99], [3, 250, 7, 7, 18, 1, 64]])
    mask = torch.tensor([[0, 0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1]])
    positions = (mask.cumsum(-1) - 1).clamp_min(0)
    with torch.no_grad():
        expected = reference(ids, attention_mask=mask, position_ids=positions).logits
    logits, _cache = ours(ids, attention_mask=mask)
    real = mask.bool()
    assert (logits - expected)[real].abs().max() < 1e-4
    alone, _cache = ours(ids[:1, 3:])
    assert torch.equal(alone[0], logits[0, 3:])
    cache = ours.new_cache(batch_size=2)
    ours(ids, cache, attention_mask=mask, last_only=True)
    more = torch.tensor([[11], [12]])
    step, _cache = ours(more, cache, attention_mask=torch.cat([mask, torch.ones(2, 1, dtype=mask.dtype)], 1))
    whole, _cache = ours(torch.cat([ids, more], 1), attention_mask=torch.cat([mask, torch.ones(2, 1, dtype=mask.dtype)], 1))
    assert (step[:, 0] - whole[:, -1]).abs().max() < 1e-4


def test_a_config_the_core_does_not_implement_is_refused():
    base = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 8, "num_key_value_heads": 4}
    assert LlamaConfig.from_dict(base).group == 2
    for change in ({"model_type": "gpt2"}, {"num_key_value_heads": 3}, {"hidden_act": "gelu"},
                   {"rope_scaling": {"type": "linear", "factor": 2.0}}, {"attention_bias": True},
                   {"hidden_size": 60}, {"rms_norm_eps": -1}):
        with pytest.raises(ConfigError):
            LlamaConfig.from_dict({**base, **change})


def test_a_beginning_or_padding_id_outside_the_vocabulary_counts_as_none_named():
    """They serve prepend_bos and padding only: a config that loaded before (older converted LLaMA
    configs write pad_token_id -1) still loads, and falls back to end-of-text."""
    base = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 8, "vocab_size": 300}
    for change in ({"bos_token_id": 300}, {"pad_token_id": -1}, {"bos_token_id": "<s>"}, {"pad_token_id": True}):
        config = LlamaConfig.from_dict({**base, **change})
        assert (config.bos_token_id, config.pad_token_id) == (None, None), change
    assert LlamaConfig.from_dict({**base, "bos_token_id": 1, "pad_token_id": 299}).pad_token_id == 299
    with pytest.raises(ConfigError, match="bos_token_id must be a token id, an integer from 0 to 299, got 300"):
        LlamaConfig(vocab_size=300, bos_token_id=300)  # made directly: what a trace's config is checked against


def test_a_checkpoint_that_disagrees_with_its_config_is_refused(tmp_path):
    import json

    write_llama(tmp_path, 6, 2, True)
    config = json.loads((tmp_path / "config.json").read_text())
    config["intermediate_size"] = 48
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(WeightsError, match="gate_proj"):
        load_llama(tmp_path)



@pytest.mark.parametrize("named", [{"bos_token_id": 1, "pad_token_id": 2}, {"bos_token_id": None}])
def test_texts_start_and_pad_with_the_ids_the_config_names_as_transformer_lens(tmp_path, named):
    """SmolLM2-Instruct starts a text with <|im_start|> (1) and pads with <|im_end|> (2), not with
    <|endoftext|>, as TransformerLens's to_tokens does from the tokenizer's own tokens; a config
    that names neither starts and pads with end-of-text, as for GPT-2."""
    import shutil
    from pathlib import Path

    import gpt2viz

    write_llama(tmp_path, 6, 2, True, vocab_size=50257, eos_token_id=50256, **named)
    shutil.copy(Path(__file__).parent.parent / "assets" / "tokenizer" / "tokenizer.json", tmp_path)
    lm = gpt2viz.load_model(str(tmp_path))
    bos, pad = named["bos_token_id"] or 50256, named.get("pad_token_id", 50256)
    assert (lm.bos_id, lm.pad_id, lm.eos_id) == (bos, pad, 50256)
    hello = lm.tokenizer.encode(" Hello")
    assert lm.to_tokens(" Hello").tolist() == [[bos, *hello]]
    assert lm.to_tokens(" Hello", prepend_bos=False).tolist() == [hello]
    assert lm.to_str_tokens(" Hello")[0] == lm.tokenizer.decode([bos])
    ids, mask = lm.pad([" Hello", " Hello Hello"], prepend_bos=True)
    width = 1 + 2 * len(hello)
    assert ids[0].tolist() == [pad] * len(hello) + [bos, *hello] and mask[0].tolist() == [0] * len(hello) + [1] * (1 + len(hello))
    assert ids.shape == (2, width)
