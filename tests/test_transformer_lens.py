"""gpt2viz's hook values against TransformerLens's, on the same random-weight checkpoint.

Runs where `transformer-lens` is installed (it pulls in wandb, pandas, datasets ...: too much for
the test extra, so CI skips it; `pip install transformer-lens` to run it). TransformerLens 4's
`TransformerBridge` without weight processing (`enable_compatibility_mode(no_processing=True)`)
is the reference: the model as the checkpoint stores it, with the classic hook names.
"""

from __future__ import annotations

import pytest
import torch

from helpers import PROMPT

transformer_lens = pytest.importorskip("transformer_lens")

PER_HEAD = ("attn.hook_q", "attn.hook_k", "attn.hook_v", "attn.hook_z")  # ours [B, nh, T, hd]; TL [B, T, nh, hd]
TOL = 1e-4


def plain_bridge(path):
    """TL's Bridge on the checkpoint at `path`, without weight processing (the reference)."""
    from transformer_lens.model_bridge import TransformerBridge

    bridge = TransformerBridge.boot_transformers(str(path), device="cpu")
    bridge.enable_compatibility_mode(no_processing=True, disable_warnings=True)
    return bridge


@pytest.fixture(scope="module")
def runs(ckpts):
    lm = ckpts.lm("odd-heads")
    bridge = plain_bridge(str(ckpts.path("odd-heads")))
    ids = lm.tokenizer.encode(PROMPT)
    ours: dict[str, torch.Tensor] = {}
    with lm.hooks.subscribe("*", lambda name, value: ours.setdefault(name, value.clone()) if isinstance(value, torch.Tensor) else None):
        logits, _cache = lm.model(torch.tensor([ids]))
    tl_logits, cache = bridge.run_with_cache(torch.tensor([ids]))
    return lm, ours, dict(cache.items()), logits, tl_logits


def test_the_logits_agree(runs):
    _lm, _ours, _theirs, logits, tl_logits = runs
    assert float((logits - tl_logits).abs().max()) <= TOL


def test_every_shared_hook_carries_the_same_values(runs):
    lm, ours, theirs, _logits, _tl = runs
    shared = sorted(set(ours) & set(theirs))
    assert len(shared) >= 4 + 16 * lm.config.n_layer  # everything but gpt2viz's own (kv_cache, sample)
    for name in shared:
        mine, tl = ours[name], theirs[name]
        if name.endswith(PER_HEAD):
            mine = mine.transpose(1, 2)
        if name.endswith("hook_attn_scores"):  # masked entries: -inf here, a large negative number there
            seen = torch.isfinite(mine)
            mine, tl = mine[seen], tl[seen]
        assert mine.shape == tl.shape, name
        assert float((mine.float() - tl.float()).abs().max()) <= TOL, name


def test_hook_normalized_is_the_layernorm_before_its_learned_scale_and_bias(runs):
    """TransformerLens versions differ here; gpt2viz fires what the TransformerBridge fires:
    (x - mean) / sqrt(var + eps)."""
    lm, ours, theirs, _logits, _tl = runs
    x = ours["blocks.0.hook_resid_pre"]
    expected = torch.nn.functional.layer_norm(x, (x.size(-1),), eps=lm.model.h[0].ln_1.eps)
    assert float((ours["blocks.0.ln1.hook_normalized"] - expected).abs().max()) <= 1e-5
    assert float((theirs["blocks.0.ln1.hook_normalized"] - expected).abs().max()) <= TOL


@pytest.fixture(scope="module")
def caches(ckpts):
    """gpt2viz's ActivationCache and TransformerLens's of the same pass: TL without weight
    processing, and TL with fold_ln only (the convention gpt2viz's logit_attrs follows)."""
    from transformer_lens.model_bridge import TransformerBridge

    lm = ckpts.lm("odd-heads")
    ids = torch.tensor([lm.tokenizer.encode(PROMPT)])
    logits, ours = lm.run_with_cache(ids)
    plain = plain_bridge(str(ckpts.path("odd-heads")))
    folded = TransformerBridge.boot_transformers(str(ckpts.path("odd-heads")), device="cpu")
    folded.enable_compatibility_mode(disable_warnings=True, fold_ln=True, center_writing_weights=False,
                                     center_unembed=False, fold_value_biases=False)
    return logits, ours, plain.run_with_cache(ids)[1], folded.run_with_cache(ids)[1]


@pytest.mark.parametrize("method, kwargs", [
    ("accumulated_resid", {}), ("accumulated_resid", {"incl_mid": True}), ("accumulated_resid", {"layer": 1}),
    ("accumulated_resid", {"pos_slice": -1}),
    ("decompose_resid", {}), ("decompose_resid", {"mode": "attn"}), ("decompose_resid", {"layer": 1}),
    ("decompose_resid", {"apply_ln": True}), ("decompose_resid", {"pos_slice": -1}),
    ("stack_head_results", {}), ("stack_head_results", {"apply_ln": True}), ("stack_head_results", {"layer": 1}),
    ("stack_head_results", {"pos_slice": -1}),
    # TL's other layer arguments: -1 and None for after the last block, a block's LayerNorm scale
    # at a block, the MLP's input, an empty stack before block 0, the rest of the stream.
    ("accumulated_resid", {"layer": -1}), ("accumulated_resid", {"layer": 1, "apply_ln": True}),
    ("accumulated_resid", {"layer": 1, "mlp_input": True, "apply_ln": True}),
    ("decompose_resid", {"layer": -1}), ("decompose_resid", {"layer": 1, "apply_ln": True}),
    ("decompose_resid", {"layer": 1, "mlp_input": True, "apply_ln": True}),
    ("decompose_resid", {"layer": 1, "mode": "mlp", "pos_slice": -1}),
    ("stack_head_results", {"layer": None}), ("stack_head_results", {"layer": 0}),
    ("stack_head_results", {"layer": 1, "apply_ln": True}), ("stack_head_results", {"layer": 1, "incl_remainder": True}),
    # Each neuron's result, and the whole stream taken apart into heads, neurons, embeddings, biases.
    ("stack_neuron_results", {"layer": 1}), ("stack_neuron_results", {"layer": 2, "pos_slice": -1, "neuron_slice": [0, 7]}),
    ("stack_neuron_results", {"layer": 1, "neuron_slice": 3, "incl_remainder": True, "apply_ln": True}),
    ("stack_neuron_results", {"layer": 1, "incl_remainder": True, "mlp_input": True}),
    ("get_full_resid_decomposition", {}), ("get_full_resid_decomposition", {"layer": 1, "mlp_input": True}),
    ("get_full_resid_decomposition", {"expand_neurons": False}), ("get_full_resid_decomposition", {"layer": 0}),
    ("get_full_resid_decomposition", {"layer": 1, "apply_ln": True, "pos_slice": slice(1, 3)}),
])
def test_the_cache_s_analysis_methods_equal_transformer_lens_s(caches, method, kwargs):
    _logits, ours, theirs, _folded = caches
    mine, labels = getattr(ours, method)(return_labels=True, **kwargs)
    tl, tl_labels = getattr(theirs, method)(return_labels=True, **kwargs)
    assert labels == tl_labels and mine.shape == tl.shape
    assert not mine.numel() or float((mine - tl.detach()).abs().max()) <= 1e-5  # empty: the stack before block 0


@pytest.mark.parametrize("kwargs", [{}, {"neuron_slice": 5}, {"neuron_slice": slice(2, 9), "pos_slice": -1}])
def test_neuron_results_equal_transformer_lens_s(caches, kwargs):
    _logits, ours, theirs, _folded = caches
    mine, tl = ours.get_neuron_results(1, **kwargs), theirs.get_neuron_results(1, **kwargs)
    assert mine.shape == tl.shape and float((mine - tl.detach()).abs().max()) <= 1e-5


def test_a_cache_without_its_batch_axis_equals_transformer_lens_s(ckpts):
    """run_with_cache(remove_batch_dim=True): every activation, and the analyses of the cache."""

    lm = ckpts.lm("odd-heads")
    ids = torch.tensor([lm.tokenizer.encode(PROMPT)])
    _logits, ours = lm.run_with_cache(ids, remove_batch_dim=True)
    bridge = plain_bridge(str(ckpts.path("odd-heads")))
    _tl_logits, theirs = bridge.run_with_cache(ids, remove_batch_dim=True)
    for name in ("pattern", "z", "resid_post", "post"):
        assert ours[name, 1].shape == theirs[name, 1].shape, name
    for method, kwargs in (("decompose_resid", {"apply_ln": True}), ("accumulated_resid", {"pos_slice": -1}),
                           ("stack_head_results", {"incl_remainder": True}), ("get_full_resid_decomposition", {})):
        mine, tl = getattr(ours, method)(**kwargs), getattr(theirs, method)(**kwargs)
        assert mine.shape == tl.shape and float((mine - tl.detach()).abs().max()) <= 1e-5, method


def test_head_results_and_batch_rows_equal_transformer_lens_s(ckpts):
    """compute_head_results and apply_slice_to_batch_dim on a padded batch, at the real positions
    (padded ones differ: no position attends to padding, and what a padded query sees is no one's)."""

    lm = ckpts.lm("odd-heads")
    ids, mask = lm.pad([PROMPT, "Hello there"], side="right")
    _logits, ours = lm.run_with_cache(ids, attention_mask=mask)
    bridge = plain_bridge(str(ckpts.path("odd-heads")))
    _tl_logits, theirs = bridge.run_with_cache(ids, attention_mask=mask)
    ours.compute_head_results()
    theirs.compute_head_results()
    real = mask.bool()
    assert ours["result", 1].shape == theirs["result", 1].shape
    assert float((ours["result", 1] - theirs["result", 1])[real].abs().max()) <= 1e-5
    for rows in (1, [1], slice(0, 1)):
        mine, tl = ours.apply_slice_to_batch_dim(rows), theirs.apply_slice_to_batch_dim(rows)
        assert mine.has_batch_dim == tl.has_batch_dim and mine["pattern", 0].shape == tl["pattern", 0].shape
        at = real[rows]
        assert float((mine.decompose_resid() - tl.decompose_resid())[:, at].abs().max()) <= 1e-5, rows


def test_the_weights_equal_transformer_lens_s(tmp_path):
    """lm.W_Q and the rest, as TL's Bridge gives them with the norms folded in (fold_ln, nothing
    centred, value biases left where they are: the convention of gpt2viz's ActivationCache): the
    bundled model's (trained norms), and a LLaMA-family model's (grouped keys and values, a head
    of its own, a gate, norms of random gains)."""
    import shutil
    from pathlib import Path

    from transformer_lens.model_bridge import TransformerBridge
    from transformers import LlamaConfig, LlamaForCausalLM

    import gpt2viz

    torch.manual_seed(0)
    llama = LlamaForCausalLM(LlamaConfig(
        vocab_size=50257, hidden_size=48, intermediate_size=96, num_hidden_layers=2, num_attention_heads=6,
        num_key_value_heads=2, max_position_embeddings=64, tie_word_embeddings=False))
    with torch.no_grad():
        for name, p in llama.named_parameters():
            if "norm" in name:
                p.copy_(torch.rand_like(p) + 0.5)
    llama.save_pretrained(tmp_path)
    shutil.copy(Path(__file__).parent.parent / "assets" / "tokenizer" / "tokenizer.json", tmp_path)
    tiny = Path(__file__).parent.parent / "assets" / "tiny"
    for path, names in ((tiny, ("W_E", "W_pos", "W_U", "b_U", "W_Q", "W_K", "W_V", "W_O", "b_Q",
                                "b_K", "b_V", "b_O", "W_in", "W_out", "b_in", "b_out")),
                        (tmp_path, ("W_E", "W_U", "b_U", "W_Q", "W_K", "W_V", "W_O", "W_in", "W_gate", "W_out"))):
        bridge = TransformerBridge.boot_transformers(str(path), device="cpu")
        bridge.enable_compatibility_mode(disable_warnings=True, fold_ln=True, center_writing_weights=False,
                                         center_unembed=False, fold_value_biases=False)
        lm = gpt2viz.load_model(str(path))
        for name in names:
            mine, tl = getattr(lm, name), getattr(bridge, name).detach()
            assert mine.shape == tl.shape, (path.name, name)
            assert float((mine - tl).abs().max()) <= 1e-5 * max(1.0, float(tl.abs().max())), (path.name, name)
        # The factored circuits (GQA's key/value heads repeated per query head, as TL's) and what
        # circuit code reads from them: the factors, singular values, norms, eigenvalues.
        with torch.no_grad():
            for name in ("QK", "OV"):
                mine, tl = getattr(lm, name), getattr(bridge, name)
                assert mine.shape == tl.shape and mine.mdim == tl.mdim, (path.name, name)
                for part in ("A", "B"):
                    a, b = getattr(mine, part), getattr(tl, part)
                    assert float((a - b).abs().max()) <= 1e-5 * max(1.0, float(b.abs().max())), (path.name, name, part)
                one, theirs = mine[1, 2], tl[1, 2]
                assert torch.allclose(one.S, theirs.S, rtol=1e-4, atol=1e-6), (path.name, name)
                assert torch.allclose(one.norm(), theirs.norm(), rtol=1e-5), (path.name, name)
                top = lambda values: sorted(values.abs().tolist())[-5:]  # noqa: E731
                assert top(one.eigenvalues) == pytest.approx(top(theirs.eigenvalues), rel=1e-3)
                assert torch.allclose(one[3:7, -1].AB, theirs[3:7, -1].AB, atol=1e-6)
                assert torch.allclose(mine[:, 2, 5].AB, tl[:, 2, 5].AB, atol=1e-6)


def test_the_logit_lens_equals_transformer_lens_s_with_the_layernorm_folded(caches):
    """accumulated_resid(apply_ln=True) normalises each stream by its own scale; TL applies its
    ln_final module, which with fold_ln is that normalisation (γ and β went into the unembedding)."""
    _logits, ours, _theirs, folded = caches
    mine = ours.accumulated_resid(apply_ln=True)
    tl = folded.accumulated_resid(apply_ln=True)
    assert float((mine - tl.detach()).abs().max()) <= 1e-5


def test_logit_attributions_equal_transformer_lens_s_with_the_layernorm_folded(caches):
    logits, ours, _theirs, folded = caches
    token, other = logits[0, -1].topk(2).indices.tolist()
    mine = ours.logit_attrs(ours.decompose_resid(), token)
    tl = folded.logit_attrs(folded.decompose_resid(), token)
    assert float((mine - tl.detach()).abs().max()) <= 1e-5
    mine = ours.logit_attrs(ours.stack_head_results(pos_slice=-1), token, incorrect_tokens=other, pos_slice=-1)
    tl = folded.logit_attrs(folded.stack_head_results(pos_slice=-1), token, incorrect_tokens=other, pos_slice=-1)
    assert float((mine - tl.detach()).abs().max()) <= 1e-5


def test_a_llama_model_s_cache_equals_transformer_lens_s(tmp_path):
    """A LLaMA-family checkpoint (grouped keys, an LM head of its own): the rotated queries and
    keys in TL's layout, the stream taken apart without a position table, RMSNorm's scale at a
    block, as TL's Bridge gives them."""
    import shutil
    from pathlib import Path

    from transformers import LlamaConfig, LlamaForCausalLM

    import gpt2viz

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(
        vocab_size=50257, hidden_size=48, intermediate_size=96, num_hidden_layers=2, num_attention_heads=6,
        num_key_value_heads=2, max_position_embeddings=64, tie_word_embeddings=False, bos_token_id=50256,
        eos_token_id=50256)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.2)
    model.save_pretrained(tmp_path)
    shutil.copy(Path(__file__).parent.parent / "assets" / "tokenizer" / "tokenizer.json", tmp_path)
    bridge = plain_bridge(str(tmp_path))
    ids = torch.tensor([[5, 17, 42, 99, 3, 250, 7]])
    tl_logits, theirs = bridge.run_with_cache(ids)
    logits, ours = gpt2viz.load_model(str(tmp_path)).run_with_cache(ids)
    assert float((logits - tl_logits.detach()).abs().max()) <= TOL
    for name in ("rot_q", "rot_k", "q", "k", "z"):
        assert ours[name, 0].shape == theirs[name, 0].shape, name
        assert float((ours[name, 0] - theirs[name, 0]).abs().max()) <= TOL, name
    for method, kwargs in (("decompose_resid", {}), ("decompose_resid", {"layer": 1, "apply_ln": True}),
                           ("accumulated_resid", {"layer": 1, "apply_ln": True}), ("stack_head_results", {})):
        mine, labels = getattr(ours, method)(return_labels=True, **kwargs)
        tl, tl_labels = getattr(theirs, method)(return_labels=True, **kwargs)
        assert labels == tl_labels and float((mine - tl.detach()).abs().max()) <= 1e-5, (method, kwargs)


def test_a_llama_model_s_tokens_start_and_pad_as_transformer_lens_s(tmp_path):
    """A LLaMA-family model whose beginning-of-text and padding tokens are not <|endoftext|>
    (SmolLM2-Instruct's are <|im_start|> and <|im_end|>): TL takes them from the tokenizer, gpt2viz
    from config.json (or a GGUF file's metadata), which name the same tokens."""
    import json
    import shutil
    from pathlib import Path

    from transformers import LlamaConfig, LlamaForCausalLM
    from transformer_lens.model_bridge import TransformerBridge

    import gpt2viz

    LlamaForCausalLM(LlamaConfig(
        vocab_size=50257, hidden_size=48, intermediate_size=96, num_hidden_layers=1, num_attention_heads=6,
        num_key_value_heads=2, max_position_embeddings=64, bos_token_id=0, pad_token_id=1,
        eos_token_id=50256)).save_pretrained(tmp_path)
    shutil.copy(Path(__file__).parent.parent / "assets" / "tokenizer" / "tokenizer.json", tmp_path)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({
        "bos_token": "!", "pad_token": '"', "eos_token": "<|endoftext|>", "tokenizer_class": "PreTrainedTokenizerFast"}))
    bridge = TransformerBridge.boot_transformers(str(tmp_path), device="cpu")
    lm = gpt2viz.load_model(str(tmp_path))
    for text in (" Hello", [" Hello", " Hello there you"]):
        assert lm.to_tokens(text).tolist() == bridge.to_tokens(text).tolist()
        for side in ("left", "right"):
            assert lm.to_tokens(text, padding_side=side).tolist() == bridge.to_tokens(text, padding_side=side).tolist()
    assert lm.to_tokens(" Hello")[0, 0] == 0 and lm.to_tokens([" Hi", " Hi there"])[0, -1] == 1
    assert lm.to_str_tokens(" Hello") == bridge.to_str_tokens(" Hello")


def test_stacked_activations_equal_transformer_lens_s(caches):
    _logits, ours, theirs, _folded = caches
    for args in (("pattern",), ("z", 1), ("scale", -1, "ln2"), ("resid_post", None)):
        mine, tl = ours.stack_activation(*args), theirs.stack_activation(*args)
        assert mine.shape == tl.shape and float((mine - tl.detach()).abs().max()) <= 1e-5, args


def test_return_types_equal_transformer_lens_s(runs, ckpts):
    """The loss, per token and whole, as TL's run_with_hooks gives it, and for a padded batch with
    its mask as TL's loss function (lm_cross_entropy_loss) gives it on the same logits."""

    lm = runs[0]
    bridge = plain_bridge(str(ckpts.path("odd-heads")))
    ids = torch.tensor([lm.tokenizer.encode(PROMPT)])
    for per_token in (False, True):
        ours = lm.run_with_hooks(ids, return_type="loss", loss_per_token=per_token)
        theirs = bridge.run_with_hooks(ids, return_type="loss", loss_per_token=per_token)
        assert ours.shape == theirs.shape and float((ours - theirs).abs().max()) <= TOL
    logits, loss = lm.run_with_cache(ids, return_type="both")[0]
    (tl_logits, tl_loss), _cache = bridge.run_with_cache(ids, return_type="both")
    assert float((logits - tl_logits).abs().max()) <= TOL and abs(float(loss - tl_loss)) <= TOL
    assert lm.run_with_hooks(ids, return_type=None) is None and bridge.run_with_hooks(ids, return_type=None) is None
    # A padded batch: TL's loss function with the mask, on the same logits.
    from transformer_lens.utilities.lm_utils import lm_cross_entropy_loss

    padded, mask = lm.pad([PROMPT, "Hello there"], side="right")
    logits = lm.run_with_hooks(padded, attention_mask=mask)
    for per_token in (False, True):
        ours = lm.run_with_hooks(padded, attention_mask=mask, return_type="loss", loss_per_token=per_token)
        theirs = lm_cross_entropy_loss(logits, padded, attention_mask=mask, per_token=per_token)
        assert float((ours - theirs).abs().max()) <= 1e-6


def test_a_text_is_read_with_transformer_lens_s_beginning_of_text(ckpts):
    """run_with_cache, run_with_hooks and lm(...) of a text start it with <|endoftext|> as TL's
    do: the same positions and logits, and the same loss."""
    import gpt2viz

    lm = ckpts.lm("odd-heads")
    bridge = plain_bridge(str(ckpts.path("odd-heads")))
    text = "When Mary and John went to the store, John gave a drink to"
    theirs, cache = bridge.run_with_cache(text)
    mine, ours = lm.run_with_cache(text)
    assert mine.shape == theirs.shape and float((mine - theirs.detach()).abs().max()) <= 1e-4
    assert ours["pattern", 0].shape == cache["pattern", 0].shape
    assert abs(float(lm(text, "loss")) - float(bridge(text, return_type="loss"))) <= 1e-4
    assert isinstance(lm, gpt2viz.LanguageModel)


def test_cfg_names_the_settings_as_transformer_lens_s_cfg(ckpts):
    """lm.cfg's fields equal those of TL's Bridge cfg on the same checkpoint; normalization_type is
    HookedTransformer's after fold_ln, LNPre (the Bridge 4.3 keeps saying LN with the gains folded)."""
    from transformer_lens.model_bridge import TransformerBridge

    path = str(ckpts.path("odd-heads"))
    bridge = TransformerBridge.boot_transformers(path, device="cpu")
    bridge.enable_compatibility_mode(disable_warnings=True, fold_ln=True, center_writing_weights=False,
                                     center_unembed=False, fold_value_biases=False)
    mine, theirs = ckpts.lm("odd-heads").cfg, bridge.cfg
    assert mine.normalization_type == "LNPre" and theirs.normalization_type in ("LN", "LNPre")
    for name in ("n_layers", "d_model", "n_heads", "d_head", "d_mlp", "d_vocab", "d_vocab_out", "n_ctx", "act_fn",
                 "positional_embedding_type", "gated_mlp", "eps", "default_prepend_bos",
                 "attn_only", "parallel_attn_mlp"):
        assert getattr(mine, name) == getattr(theirs, name), (name, getattr(mine, name), getattr(theirs, name))


def test_token_positions_and_directions_equal_transformer_lens_s():
    from pathlib import Path

    from transformer_lens.model_bridge import TransformerBridge

    import gpt2viz

    path = str(Path(__file__).parent.parent / "assets" / "tiny")
    bridge = TransformerBridge.boot_transformers(path, device="cpu")
    bridge.enable_compatibility_mode(disable_warnings=True, fold_ln=True, center_writing_weights=False,
                                     center_unembed=False, fold_value_biases=False)
    lm = gpt2viz.load_model(path)
    text = "When Mary and John went to the store, John gave a drink to"
    for mode in ("first", "last"):
        assert lm.get_token_position(" John", text, mode=mode) == bridge.get_token_position(" John", text, mode=mode)
    mine, theirs = lm.tokens_to_residual_directions(" Mary"), bridge.tokens_to_residual_directions(" Mary").detach()
    assert mine.shape == theirs.shape and float((mine - theirs).abs().max()) <= 1e-5


def test_stop_at_layer_equals_transformer_lens_s(ckpts):
    lm = ckpts.lm("odd-heads")
    bridge = plain_bridge(str(ckpts.path("odd-heads")))
    ids = torch.tensor([lm.tokenizer.encode(PROMPT)])
    # (stop_at_layer=n_layer: HookedTransformer returns the stream before the final norm, as
    # gpt2viz does; the Bridge of TL 4.3 runs the whole pass and returns the logits.)
    with torch.no_grad():
        for k in (0, 1, -1):
            theirs = bridge(ids, stop_at_layer=k)
            assert float((lm(ids, stop_at_layer=k) - theirs).abs().max()) <= TOL, k
