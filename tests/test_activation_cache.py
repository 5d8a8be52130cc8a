"""run_with_cache's ActivationCache: TransformerLens's indexing, and its analyses checked against
what they must add up to in this pass (the components of the stream sum to the stream, the heads
and c_proj's bias to the attention output, the logit attributions and β · wte to the logits)."""

from __future__ import annotations

import pytest
import torch

from gpt2viz.activation_cache import act_name
from gpt2viz.attribution import direct_logit_attribution
from gpt2viz.hooks import HookNameError

PROMPT = "The meaning of life is"


@pytest.fixture(scope="module")
def run(ckpts):
    lm = ckpts.lm("tiny")
    logits, cache = lm.run_with_cache(PROMPT, prepend_bos=False)  # the positions of encode(PROMPT)
    return lm, logits, cache


def test_transformer_lens_s_short_names_index_the_cache(run):
    _lm, _logits, cache = run
    assert act_name("pattern", 1) == "blocks.1.attn.hook_pattern" and act_name("post", 0) == "blocks.0.mlp.hook_post"
    assert act_name("scale", None) == "ln_final.hook_scale" and act_name("scale", 1, "ln2") == "blocks.1.ln2.hook_scale"
    # TL's packed form: a name, its layer and layer type in one ('k6a' was taken for 'hook_k6a').
    assert [act_name(n) for n in ("k6a", "pattern3", "scale4ln1", "post3m", "normalized2ln2", "q0")] == [
        "blocks.6.attn.hook_k", "blocks.3.attn.hook_pattern", "blocks.4.ln1.hook_scale", "blocks.3.mlp.hook_post",
        "blocks.2.ln2.hook_normalized", "blocks.0.attn.hook_q"]
    assert act_name("resid_pre1") == "blocks.1.hook_resid_pre" and act_name("embed") == "hook_embed"
    assert cache["z1a"] is cache["blocks.1.attn.hook_z"]
    # TL's Slice objects as pos_slice (refused: "must be an index, a slice or a list ... got Slice").
    class Slice:  # transformer_lens.utilities.Slice's fields (TL is not installed in CI)
        def __init__(self, held, mode):
            self.slice, self.mode = held, mode

        def apply(self, tensor, dim=0):
            raise AssertionError("not called")

    whole = cache.accumulated_resid()
    assert torch.equal(cache.accumulated_resid(pos_slice=Slice(-1, "int")), whole[..., -1, :])
    assert torch.equal(cache.accumulated_resid(pos_slice=Slice(slice(1, 3), "slice")), whole[..., 1:3, :])
    assert torch.equal(cache.accumulated_resid(pos_slice=Slice([0, 2], "array")), whole[..., [0, 2], :])
    for short, layer, full in (("pattern", 1, "blocks.1.attn.hook_pattern"), ("z", 0, "blocks.0.attn.hook_z"),
                               ("resid_pre", 1, "blocks.1.hook_resid_pre"), ("mlp_out", 0, "blocks.0.hook_mlp_out"),
                               ("embed", None, "hook_embed")):
        assert cache[short, layer] is cache[full]
    with pytest.raises(HookNameError):
        cache["blocks.0.hook_resid_prre"]


def test_the_stream_s_components_add_up_to_the_stream(run):
    lm, _logits, cache = run
    n_layer = lm.config.n_layer
    acc, labels = cache.accumulated_resid(return_labels=True)
    assert labels == [f"{l}_pre" for l in range(n_layer)] + ["final_post"] and acc.shape[0] == n_layer + 1
    parts, names = cache.decompose_resid(return_labels=True)
    assert names[:3] == ["embed", "pos_embed", "0_attn_out"] and len(names) == 2 + 2 * n_layer
    assert torch.allclose(parts.sum(0), acc[-1], atol=1e-5)
    before_1 = cache.decompose_resid(layer=1)
    assert torch.allclose(before_1.sum(0), cache["resid_pre", 1], atol=1e-5)
    assert cache.accumulated_resid(layer=1, incl_mid=True, return_labels=True)[1] == ["0_pre", "0_mid", "1_pre"]


def test_each_head_s_result_adds_up_to_the_attention_output(run):
    lm, _logits, cache = run
    heads, labels = cache.stack_head_results(return_labels=True)
    n_head = lm.config.n_head
    assert labels[: n_head + 1] == [f"L0H{h}" for h in range(n_head)] + ["L1H0"]
    for layer in range(lm.config.n_layer):
        mine = heads[layer * n_head : (layer + 1) * n_head].sum(0) + lm.model.h[layer].attn.c_proj.bias
        assert torch.allclose(mine, cache["attn_out", layer], atol=1e-5)


def test_each_neuron_s_result_adds_up_to_the_mlp_output(run):
    lm, _logits, cache = run
    d_mlp = lm.config.d_mlp
    for layer in range(lm.config.n_layer):
        neurons = cache.get_neuron_results(layer)
        assert neurons.shape == (1, 5, d_mlp, lm.config.n_embd)
        assert torch.allclose(neurons.sum(-2) + lm.model.h[layer].mlp.c_proj.bias, cache["mlp_out", layer], atol=1e-5)
    one = cache.get_neuron_results(1, neuron_slice=7, pos_slice=-1)  # both axes dropped: [B, C]
    assert torch.allclose(one, cache["post", 1][:, -1, 7, None] * lm.model.h[1].mlp.c_proj.weight[7], atol=1e-7)
    stack, labels = cache.stack_neuron_results(2, neuron_slice=[3, 4], return_labels=True, incl_remainder=True)
    assert labels == ["L0N3", "L0N4", "L1N3", "L1N4", "remainder"]
    assert torch.allclose(stack.sum(0), cache["resid_post", 1], atol=1e-5)


def test_the_full_decomposition_adds_up_to_the_stream_it_takes_apart(run):
    """Every head, every neuron (or each MLP), the embeddings and the output biases on the way."""
    lm, _logits, cache = run
    n_layer, n_head, d_mlp = lm.config.n_layer, lm.config.n_head, lm.config.d_mlp
    stack, labels = cache.get_full_resid_decomposition(return_labels=True)
    assert len(labels) == n_layer * (n_head + d_mlp) + 3 == stack.shape[0]
    assert labels[n_layer * n_head] == "L0N0" and labels[-3:] == ["embed", "pos_embed", "bias"]
    biases = sum(lm.model.h[l].attn.c_proj.bias + lm.model.h[l].mlp.c_proj.bias for l in range(n_layer))
    assert torch.allclose(stack[-1, 0, 0], biases, atol=1e-6)
    for layer in range(n_layer + 1):
        for mlp_input in (False, True) if layer < n_layer else (False,):
            for expand_neurons in (True, False):
                parts = cache.get_full_resid_decomposition(layer, mlp_input=mlp_input, expand_neurons=expand_neurons)
                stream = cache["resid_mid", layer] if mlp_input else cache.accumulated_resid(layer)[-1]
                assert torch.allclose(parts.sum(0), stream, atol=1e-5), (layer, mlp_input, expand_neurons)
    just_mlps = cache.get_full_resid_decomposition(expand_neurons=False, pos_slice=-1, return_labels=True)
    assert just_mlps[1][n_layer * n_head : n_layer * n_head + 2] == ["0_mlp_out", "1_mlp_out"]
    assert just_mlps[0].shape == (n_layer * (n_head + 1) + 3, 1, lm.config.n_embd)


def test_positions_are_taken_as_transformer_lens_s_slice_takes_them(run):
    """None all, an int one (its axis dropped), a tuple the arguments of a slice, a list those."""
    _lm, _logits, cache = run
    whole = cache.decompose_resid()
    for pos_slice, expected in ((None, whole), (-1, whole[:, :, -1]), ((0, 2), whole[:, :, 0:2]), ([0, 3], whole[:, :, [0, 3]])):
        assert torch.equal(cache.decompose_resid(pos_slice=pos_slice), expected), pos_slice


def test_a_cache_without_an_embedding_is_refused_not_taken_apart_short(run):
    """A names_filter that left hook_pos_embed out: the parts would no longer add up to the stream."""
    lm, _logits, _cache = run
    _logits, partial = lm.run_with_cache(PROMPT, names_filter=lambda name: name != "hook_pos_embed")
    for method in ("decompose_resid", "get_full_resid_decomposition"):
        with pytest.raises(HookNameError, match="hook_pos_embed"):
            getattr(partial, method)()


def test_a_llama_model_s_stream_takes_apart_without_positions_or_biases(llama_lm):
    _logits, cache = llama_lm.run_with_cache("the cat sat")
    stack, labels = cache.get_full_resid_decomposition(return_labels=True)
    assert "pos_embed" not in labels and labels[-2:] == ["embed", "bias"] and not stack[-1].any()
    assert torch.allclose(stack.sum(0), cache["resid_post", -1], atol=1e-5)
    neurons = cache.get_neuron_results(0)
    assert torch.allclose(neurons.sum(-2), cache["mlp_out", 0], atol=1e-5)


def test_a_cache_of_one_text_drops_its_batch_axis_and_its_analyses_follow(run, ckpts):
    lm, _logits, cache = run
    _logits, single = lm.run_with_cache(PROMPT, remove_batch_dim=True, prepend_bos=False)
    assert not single.has_batch_dim and single["pattern", 0].shape == cache["pattern", 0].shape[1:]
    assert all(torch.equal(single[name], cache[name][0]) for name in cache)
    for method, kwargs in (("accumulated_resid", {"apply_ln": True}), ("decompose_resid", {"pos_slice": -1}),
                           ("stack_head_results", {"incl_remainder": True, "apply_ln": True}),
                           ("stack_neuron_results", {"layer": 1, "pos_slice": [0, 2]}),
                           ("get_full_resid_decomposition", {"layer": 1, "mlp_input": True})):
        alone, batched = getattr(single, method)(**kwargs), getattr(cache, method)(**kwargs)
        assert torch.allclose(alone, batched[:, 0], atol=1e-6), method
    assert torch.allclose(single.logit_attrs(single.decompose_resid(), 13), cache.logit_attrs(cache.decompose_resid(), 13)[:, 0])
    assert single.remove_batch_dim() is single  # a second time: nothing to drop
    _logits, two = lm.run_with_cache(["Hi", "Hello there"])
    for call in (two.remove_batch_dim, lambda: lm.run_with_cache(["Hi", "Hello"], remove_batch_dim=True)):
        with pytest.raises(ValueError, match="only a cache of one text has a batch axis to drop; this one holds 2"):
            call()


def test_head_results_kept_as_transformer_lens_keeps_them_add_up_to_the_attention_output(run):
    lm, _logits, cache = run
    _logits, kept = lm.run_with_cache(PROMPT, prepend_bos=False)
    kept.compute_head_results()
    for layer in range(lm.config.n_layer):
        results = kept["result", layer]  # [B, T, head, C]
        assert results.shape == (1, 5, lm.config.n_head, lm.config.n_embd)
        assert torch.allclose(results.sum(-2) + lm.model.h[layer].attn.c_proj.bias, cache["attn_out", layer], atol=1e-5)
    assert torch.equal(kept.stack_head_results()[3], kept["result", 0][:, :, 3])


def test_rows_of_a_batch_cache_are_the_caches_of_their_texts(run):
    lm, _logits, cache = run
    _logits, both = lm.run_with_cache([PROMPT, "Hi"], prepend_bos=False)  # the first row is not padded
    first, kept = both.apply_slice_to_batch_dim(0), both.apply_slice_to_batch_dim([0])
    assert not first.has_batch_dim and kept.has_batch_dim and kept["pattern", 1].shape[0] == 1
    for name in cache:
        assert torch.allclose(first[name], cache[name][0], atol=1e-5), name
    assert torch.allclose(first.get_full_resid_decomposition(1), cache.get_full_resid_decomposition(1)[:, 0], atol=1e-5)
    assert both.apply_slice_to_batch_dim(None)["pattern", 0].shape == both["pattern", 0].shape  # TL's Slice: all
    assert torch.equal(both.apply_slice_to_batch_dim((0, 1))["z", 1], kept["z", 1])  # a tuple is a slice's arguments
    for call, message in ((lambda: both.apply_slice_to_batch_dim(2), "batch_slice must be an index, a slice or a list of indices of 2, got 2"),
                          (lambda: first.apply_slice_to_batch_dim(0), "this cache has no batch axis left")):
        with pytest.raises(ValueError, match=message):
            call()


def test_logit_attributions_add_up_to_the_logits_and_agree_with_direct_logit_attribution(run):
    lm, logits, cache = run
    token = int(logits[0, -1].argmax())
    parts = cache.decompose_resid()
    attrs = cache.logit_attrs(parts, token)  # [components, B, T]: the final LayerNorm applied inside, as TL's
    beta = float(lm.model.ln_f.bias @ lm.model.wte.weight[token])
    assert torch.allclose(attrs.sum(0) + beta, logits[..., token], atol=1e-4)  # every position
    assert torch.equal(attrs, cache.logit_attrs(parts, torch.tensor(token)))
    dla = direct_logit_attribution(lm, lm.encode_prompt(PROMPT), token)
    heads = cache.logit_attrs(cache.stack_head_results(pos_slice=-1), token, pos_slice=-1)[:, 0]  # [heads, B]
    assert heads.tolist() == pytest.approx([x for row in dla.heads for x in row], abs=1e-5)
    other = int(logits[0, -1].topk(2).indices[1])
    diff = cache.logit_attrs(parts, token, incorrect_tokens=other).sum(0)[0, -1]
    beta_diff = float(lm.model.ln_f.bias @ (lm.model.wte.weight[token] - lm.model.wte.weight[other]))
    assert float(diff) + beta_diff == pytest.approx(float(logits[0, -1, token] - logits[0, -1, other]), abs=1e-4)


def test_accumulated_resid_with_the_layernorm_is_the_logit_lens(run):
    lm, logits, cache = run
    streams = cache.accumulated_resid(apply_ln=True, pos_slice=-1)  # [layers + 1, B, C], each by its own scale
    lens = streams * lm.model.ln_f.weight + lm.model.ln_f.bias
    last = lens[-1] @ lm.model.wte.weight.t()
    assert torch.allclose(last, logits[:, -1], atol=1e-4)  # the last stream's lens is the model's prediction
    assert streams.shape == (lm.config.n_layer + 1, 1, lm.config.n_embd)


def test_layer_arguments_are_transformer_lens_s(run):
    """-1 and None mean after the last block; a block's LayerNorm scale applies at a block (the
    components then add up to what that LayerNorm normalised); block 0 has no heads before it."""
    lm, _logits, cache = run
    n_layer = lm.config.n_layer
    for method in ("accumulated_resid", "decompose_resid", "stack_head_results"):
        whole, labels = getattr(cache, method)(return_labels=True)
        for layer in (-1, None, n_layer):
            same, same_labels = getattr(cache, method)(layer=layer, return_labels=True)
            assert same_labels == labels and torch.equal(same, whole), (method, layer)
    for layer in (1, n_layer - 1):
        at_ln1 = cache.decompose_resid(layer=layer, apply_ln=True).sum(0)
        assert torch.allclose(at_ln1, cache["normalized", layer, "ln1"], atol=1e-5)
        at_ln2, labels = cache.decompose_resid(layer=layer, mlp_input=True, apply_ln=True, return_labels=True)
        assert labels[-1] == f"{layer}_attn_out"
        assert torch.allclose(at_ln2.sum(0), cache["normalized", layer, "ln2"], atol=1e-5)
        streams, labels = cache.accumulated_resid(layer=layer, mlp_input=True, apply_ln=True, return_labels=True)
        assert labels[-2:] == [f"{layer}_pre", f"{layer}_mid"]
        assert torch.allclose(streams[-1], cache["normalized", layer, "ln2"], atol=1e-5)
        heads, labels = cache.stack_head_results(layer=layer, incl_remainder=True, return_labels=True)
        assert labels[-1] == "remainder" and len(labels) == layer * lm.config.n_head + 1
        assert torch.allclose(heads.sum(0), cache["resid_pre", layer], atol=1e-5)
    empty, labels = cache.stack_head_results(layer=0, return_labels=True)
    assert labels == [] and empty.shape == (0, *cache["hook_embed"].shape)
    assert torch.equal(cache.stack_head_results(layer=0, incl_remainder=True)[0], cache["resid_pre", 0])


@pytest.mark.parametrize("call, message", [
    (lambda c: c.decompose_resid(mode="atn"), "mode must be 'all', 'attn' or 'mlp', got 'atn'"),
    (lambda c: c.accumulated_resid(layer=99), "layer must be a block from 0 to 2, or -1 or None for after the last, got 99"),
    (lambda c: c.stack_head_results(layer=-2), "layer must be a block from 0 to 2,.* got -2"),
    (lambda c: c.apply_ln_to_stack(c.decompose_resid(), layer="1"), "got '1'"),
    (lambda c: c.logit_attrs(c.decompose_resid(), -1), "tokens must be a token id from 0 to 50256, got -1"),
    (lambda c: c.logit_attrs(c.decompose_resid(), torch.tensor([[3, 10**6]])), "got 1000000"),
    (lambda c: c.logit_attrs(c.decompose_resid(), 2.0), "got 2.0"),
    (lambda c: c.logit_attrs(c.decompose_resid(), " Paris", incorrect_tokens=" a big dog"),
     r"incorrect_tokens must be a text of one token, got ' a big dog' \(3 tokens\)"),
    (lambda c: c.logit_attrs(c.decompose_resid(), torch.tensor([5]), incorrect_tokens=torch.tensor([5, 6])),
     r"incorrect_tokens must have the shape of tokens, \[1\], got \[2\]"),
    (lambda c: c.decompose_resid(None, mlp_input=True), "mlp_input needs a block's MLP: layer 2 is after the last block"),
    (lambda c: c.get_neuron_results(3), "layer must be a block from 0 to 1, got 3"),
    (lambda c: c.get_full_resid_decomposition(-1, mlp_input=True), "mlp_input needs a block's MLP"),
    (lambda c: c.stack_neuron_results(layer=7), "layer must be a block from 0 to 2, or -1 or None"),
    (lambda c: c.get_neuron_results(0, neuron_slice=10**6), "neuron_slice must be an index, a slice or a list of indices of 256, got 1000000"),
    (lambda c: c.decompose_resid(pos_slice=99), "pos_slice must be an index, a slice or a list of indices of 5, got 99"),
    (lambda c: c.to(torch.float64), "device must be a device such as 'cpu', got the dtype float64"),
    # A stack made at one position normed at all of them broadcast into a grid (TL raises).
    (lambda c: c.apply_ln_to_stack(c.decompose_resid(pos_slice=-1)),
     r"stack \[6, 1, 64\] does not fit this cache's scale at pos_slice None: give apply_ln_to_stack the pos_slice"),
])
def test_arguments_the_analyses_cannot_use_are_one_line_errors(run, call, message):
    """Each used to give a wrong answer unseen (an empty stack, the embeddings alone) or torch's
    own error."""
    _lm, _logits, cache = run
    with pytest.raises(ValueError, match=message) as caught:
        call(cache)
    assert "\n" not in str(caught.value)


def test_a_one_token_text_is_a_logit_direction(run):
    lm, _logits, cache = run
    parts = cache.decompose_resid(pos_slice=-1)
    paris = lm.to_single_token(" Paris")
    assert torch.equal(cache.logit_attrs(parts, " Paris", pos_slice=-1), cache.logit_attrs(parts, paris, pos_slice=-1))


def test_the_cache_is_indexed_and_asked_as_transformer_lens_s(run):
    lm, _logits, cache = run
    last = lm.config.n_layer - 1
    assert cache["pattern", -1] is cache["pattern", last] and cache["attn", 0] is cache["pattern", 0]
    assert cache["embed"] is cache["hook_embed"] and cache["attn_logits", 1] is cache["blocks.1.attn.hook_attn_scores"]
    assert ("pattern", 0) in cache and "embed" in cache and ("pattern", 99) not in cache
    assert cache.get(("z", 1)) is cache["z", 1] and cache.get("hook_nothing") is None
    assert repr(cache).startswith("ActivationCache with keys ['hook_embed', 'hook_pos_embed', 'blocks.0.hook_resid_pre'")
    assert len(repr(cache)) < 10_000  # not every tensor (a dict's repr)
    with pytest.raises(HookNameError, match=r"gpt2viz has no hook point 'blocks.0.attn.hook_result': each head's output .*stack_head_results"):
        cache["result", 0]
    _logits, patterns = lm.run_with_cache(PROMPT, "blocks.*.attn.hook_pattern")
    with pytest.raises(HookNameError, match=r"'blocks.0.hook_resid_pre' is a hook point of the model, but not in this cache: "
                                            r"its pass kept 2 hook points \(run_with_cache's names_filter\)"):
        patterns["resid_pre", 0]
    with pytest.raises(HookNameError, match="the closest: blocks.0.hook_resid_pre"):
        patterns["resid_prre", 0]
    # The model's step hooks fire in no pass of run_with_cache ('sample' once read 'no hook point
    # named hook_sample; the closest: sample').
    with pytest.raises(HookNameError, match="'sample' is not in a cache of run_with_cache: it fires after a pass with a KV"):
        cache["sample"]


def test_a_token_per_row_of_a_batch_is_read_as_transformer_lens_reads_it(run):
    """TL's logit_attrs takes a [batch] tensor as one token per row (the review found it lined up
    against the positions, silently wrong where batch and positions are as many)."""
    lm, _logits, _cache = run
    ids = torch.tensor([lm.encode_prompt("The capital"), lm.encode_prompt("Hello there")])
    assert ids.shape == (2, 2)  # as many rows as positions: the case that went wrong unseen
    logits, cache = lm.run_with_cache(ids)
    tokens = torch.tensor([11, 13])
    attrs = cache.logit_attrs(cache.decompose_resid(), tokens)  # [components, batch, positions]
    beta = lm.model.ln_f.bias @ lm.model.wte.weight[tokens].t()  # [batch]
    expected = torch.stack([logits[0, :, 11], logits[1, :, 13]])
    assert torch.allclose(attrs.sum(0) + beta[:, None], expected, atol=1e-4)


def test_nothing_before_block_0_is_an_empty_stack(run):
    _lm, _logits, cache = run
    stack, labels = cache.decompose_resid(0, incl_embeds=False, return_labels=True)
    assert labels == [] and stack.shape == (0, *cache["hook_embed"].shape)


def test_an_activation_stacked_over_the_blocks(run):
    lm, _logits, cache = run
    patterns = cache.stack_activation("pattern")
    assert patterns.shape == (lm.config.n_layer, *cache["pattern", 0].shape)
    assert all(torch.equal(patterns[l], cache["pattern", l]) for l in range(lm.config.n_layer))
    assert torch.equal(cache.stack_activation("scale", 1, "ln2")[0], cache["blocks.0.ln2.hook_scale"])
    assert cache.to("cpu") is cache
    with pytest.raises(ValueError, match="no block comes before block 0"):
        cache.stack_activation("pattern", 0)
