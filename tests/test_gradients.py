"""Passes with gradients (`grad=True`): the same logits as inference, activations in the graph as
the hooks see them, and attribution patching, checked against real activation patching."""

from __future__ import annotations

import pytest
import torch

import gpt2viz
from gpt2viz.errors import InputError
from gpt2viz.patching import (
    attribution_patch_residual_stream,
    patch_residual_stream,
    residuals,
)

PROMPT = "The meaning of life is"


def test_a_pass_with_gradients_computes_what_inference_does_and_hooks_see_the_graph(tiny_lm):
    ids = torch.tensor([tiny_lm.tokenizer.encode(PROMPT)])
    plain, _ = tiny_lm.model(ids)
    assert not plain.requires_grad  # inference mode stays the default
    seen = {}

    def keep(name: str, value: torch.Tensor) -> None:
        seen[name] = value

    with tiny_lm.hooks.subscribe(["blocks.1.hook_resid_pre", "blocks.1.attn.hook_z"], keep):
        logits, _ = tiny_lm.model(ids, grad=True)
    assert logits.grad_fn is not None and all(v.grad_fn is not None for v in seen.values())
    assert torch.equal(logits.detach(), plain)
    (grad,) = torch.autograd.grad(logits[0, -1].max(), seen["blocks.1.hook_resid_pre"])
    assert grad.shape == seen["blocks.1.hook_resid_pre"].shape and float(grad.abs().sum()) > 0
    assert all(not p.requires_grad for p in tiny_lm.model.parameters())  # the weights stay constants


def test_run_with_cache_with_gradients_keeps_the_activations_in_the_graph(tiny_lm):
    logits, cache = tiny_lm.run_with_cache(PROMPT, "blocks.*.hook_resid_post", grad=True)
    last = cache[f"blocks.{tiny_lm.config.n_layer - 1}.hook_resid_post"]
    (grad,) = torch.autograd.grad(logits[0, -1, 13], last)
    assert float(grad[0, :-1].abs().max()) == 0  # only the last position's stream makes its logits
    assert float(grad[0, -1].abs().max()) > 0


@pytest.mark.parametrize("call", [
    lambda lm: lm.model(torch.tensor([[1, 2]]), lm.model.new_cache(), grad=True),
    lambda lm: gpt2viz.load_model("tiny", dtype="bfloat16").model(torch.tensor([[1, 2]]), grad=True),
])
def test_what_a_pass_with_gradients_cannot_take_is_refused(tiny_lm, call):
    with pytest.raises(InputError) as caught:
        call(tiny_lm)
    assert caught.value.setting == "grad"


def test_attribution_patching_ranks_as_real_patching_does():
    """On the bundled (trained) model: 'The king is dead and the queen' against the queen and king
    swapped. Measured: correlation 0.998, rank correlation 0.98, the same top cell."""
    lm = gpt2viz.load_model("tiny")
    clean, corrupted = (lm.tokenizer.encode(t) for t in ("The king is dead and the queen", "The queen is dead and the king"))
    _, clean_logits = residuals(lm, clean)
    rival = int(clean_logits.topk(2).indices[1])  # both prompts predict the same token: its runner-up
    real = patch_residual_stream(lm, clean, corrupted, rival)
    approx = attribution_patch_residual_stream(lm, clean, corrupted, rival)
    assert (approx.clean_answer, approx.corrupted_answer) == (real.clean_answer, real.corrupted_answer)
    r, a = torch.tensor(real.restored).flatten(), torch.tensor(approx.restored).flatten()

    def ranks(t: torch.Tensor) -> torch.Tensor:
        return t.argsort(descending=True).argsort().float()

    assert float(torch.corrcoef(torch.stack([r, a]))[0, 1]) > 0.95
    assert float(torch.corrcoef(torch.stack([ranks(r), ranks(a)]))[0, 1]) > 0.9
    assert int(r.argmax()) == int(a.argmax())


def test_gradients_reach_a_per_head_activation_kept_in_tl_s_layout(tiny_lm):
    logits, cache = tiny_lm.run_with_cache(PROMPT, "blocks.1.attn.hook_z", grad=True)
    z = cache["blocks.1.attn.hook_z"]  # [batch, position, head, d_head]
    assert z.shape[2] == tiny_lm.config.n_head
    (grad,) = torch.autograd.grad(logits[0, -1].max(), z)
    assert float(grad[0, -1].abs().sum()) > 0 and float(grad[0, :, 0].abs().sum()) > 0


@pytest.mark.parametrize("name, edit", [
    ("blocks.1.attn.hook_z", lambda z: z[:, :, 3].zero_()),  # [batch, pos, head, d_head]: head 3
    ("blocks.1.attn.hook_q", lambda q: q[:, :, 3].zero_()),
    ("blocks.1.attn.hook_pattern", lambda p: p[:, 3].zero_()),  # [batch, head, query, key]
    ("hook_embed", lambda x: x[:, 2].zero_()),
])
def test_a_hook_that_edits_in_place_runs_with_gradients_as_without(tiny_lm, name, edit):
    # TransformerLens's ablations edit in place; with grad=True such an edit once broke the
    # backward pass (a view of c_attn's output, or a tensor autograd keeps for the backward pass).
    tokens = tiny_lm.to_tokens("The king hath sent for thee")

    def hook(value, hook):
        edit(value)

    plain = float(tiny_lm(tokens, return_type="loss"))
    without = float(tiny_lm.run_with_hooks(tokens, return_type="loss", fwd_hooks=[(name, hook)]))
    loss = tiny_lm.run_with_hooks(tokens, return_type="loss", grad=True, fwd_hooks=[(name, hook)])
    grads = []
    kept = tiny_lm.run_with_hooks(tokens, return_type="loss", grad=True,
                                  fwd_hooks=[(name, lambda value, hook: value.register_hook(grads.append) and None)])
    kept.backward()
    loss.backward()
    assert float(loss.detach()) == pytest.approx(without, abs=1e-5) and without != plain  # the edit took effect
    assert len(grads) == 1 and float(grads[0].abs().sum()) > 0  # a gradient hook on the activation fires


def test_backward_hooks_get_the_gradients_autograd_gives(tiny_lm):
    # TL's backward hooks (bwd_hooks, add_hook(..., "bwd")) were refused: their gradients, in TL's
    # layouts, are what torch.autograd.grad gives of the activations kept with run_with_cache.
    tokens = tiny_lm.to_tokens("The king hath sent for thee")
    names = ["blocks.1.hook_resid_pre", "blocks.1.attn.hook_z", "blocks.0.attn.hook_pattern", "blocks.0.mlp.hook_post"]
    got = {}

    def save(grad, hook):
        got[hook.name] = grad.detach().clone()

    tiny_lm.run_with_hooks(tokens, return_type="loss", grad=True, bwd_hooks=[(n, save) for n in names]).backward()
    logits, cache = tiny_lm.run_with_cache(tokens, names, grad=True)
    loss = torch.nn.functional.cross_entropy(logits[0, :-1], tokens[0, 1:])
    wanted = torch.autograd.grad(loss, [cache[n] for n in names])
    for name, grad in zip(names, wanted):
        assert got[name].shape == grad.shape and torch.allclose(got[name], grad, atol=1e-6), name
    # add_hook's: kept until reset_hooks; a permanent one until reset_hooks(including_permanent=True).
    calls = []
    try:  # the model is the session's: no hook left on it whatever fails
        tiny_lm.add_hook("blocks.1.hook_resid_pre", lambda grad, hook: calls.append("bwd"), dir="bwd")
        tiny_lm.add_hook("blocks.1.hook_resid_pre", lambda x, hook: calls.append("kept"), is_permanent=True)
        tiny_lm.run_with_hooks(tokens, return_type="loss", grad=True).backward()
        assert sorted(calls) == ["bwd", "kept"]
        tiny_lm.reset_hooks()
        tiny_lm(tokens)
        assert sorted(calls) == ["bwd", "kept", "kept"]
    finally:
        tiny_lm.reset_hooks(including_permanent=True)
    tiny_lm(tokens)
    assert len(calls) == 3
    # A backward hook in a pass without gradients has nothing to hook: said, not ignored.
    with pytest.raises(InputError, match="bwd_hooks are called by the backward pass: run with grad=True"):
        tiny_lm.run_with_hooks(tokens, bwd_hooks=[(names[0], save)])


def test_a_hook_that_returns_no_tensor_is_told_so_with_gradients_too(tiny_lm):
    from gpt2viz.hooks import HookEditError

    tokens = tiny_lm.to_tokens("Hi there")
    for grad in (False, True):
        with pytest.raises(HookEditError, match="a subscriber returned a int, not a tensor"):
            tiny_lm.run_with_hooks(tokens, grad=grad, fwd_hooks=[("blocks.1.attn.hook_z", lambda z, hook: 3)])
