"""`return_type` of run_with_hooks and run_with_cache, as TransformerLens's: the logits, the
next-token loss (the cross-entropy of each token given the ones before), both, or nothing. The
loss is checked against transformers' own on the same weights (GPT2LMHeadModel's `labels=`)."""

from __future__ import annotations

import pytest
import torch

from gpt2viz.errors import InputError
from gpt2viz.next_token_loss import next_token_loss

TEXT = "The capital of France is Paris, and the capital of Italy is Rome"


@pytest.fixture(scope="module")
def lm(ckpts):
    return ckpts.lm("tiny")


def test_the_loss_is_transformers_loss(lm, tiny_hf):
    ids = lm.to_tokens(TEXT)
    loss = lm.run_with_hooks(ids, return_type="loss")
    with torch.no_grad():
        theirs = tiny_hf(ids, labels=ids).loss
    assert loss.shape == () and abs(float(loss) - float(theirs)) < 1e-5
    logits, both = lm.run_with_cache(ids, return_type="both")[0]
    assert torch.allclose(both, loss) and torch.allclose(logits, lm.run_with_hooks(ids), atol=1e-6)
    per_token = lm.run_with_hooks(ids, return_type="loss", loss_per_token=True)
    assert per_token.shape == (1, ids.size(1) - 1) and torch.allclose(per_token.mean(), loss)
    assert lm.run_with_hooks(ids, return_type=None) is None


def test_the_loss_of_a_hooked_pass_is_the_hooked_pass_s(lm):
    ids = lm.to_tokens(TEXT)
    def zero_mlp(activation, hook):
        return torch.zeros_like(activation)
    plain = lm.run_with_hooks(ids, return_type="loss")
    ablated = lm.run_with_hooks(ids, [("blocks.0.hook_mlp_out", zero_mlp)], return_type="loss")
    assert float(ablated) != float(plain)


def test_padding_counts_in_no_prediction(lm):
    """A padded batch's loss is its real predictions' mean; each row's the row's own."""
    ids, mask = lm.pad([TEXT, "Hello there"], side="right", prepend_bos=True)
    per_token = lm.run_with_hooks(ids, attention_mask=mask, return_type="loss", loss_per_token=True)
    for row, text in enumerate([TEXT, "Hello there"]):
        alone = lm.run_with_hooks(text, prepend_bos=True, return_type="loss", loss_per_token=True)[0]
        assert torch.allclose(per_token[row, : alone.numel()], alone, atol=1e-5)
        assert not per_token[row, alone.numel():].any()  # padding: no prediction
    counted = (mask[:, :-1] * mask[:, 1:]).sum()
    mean = lm.run_with_hooks(ids, attention_mask=mask, return_type="loss")
    assert torch.allclose(mean, per_token.sum() / counted)


def test_the_loss_takes_gradients_back_to_the_cache(lm):
    loss, cache = lm.run_with_cache(TEXT, "blocks.0.hook_resid_mid", grad=True, return_type="loss")
    (grad,) = torch.autograd.grad(loss, cache["blocks.0.hook_resid_mid"])
    assert grad.shape == cache["blocks.0.hook_resid_mid"].shape and grad.abs().sum() > 0


def test_what_cannot_give_a_loss_is_one_line(lm):
    with pytest.raises(InputError, match=r"return_type must be 'logits', 'loss', 'both' or None, got 'los'"):
        lm.run_with_hooks(TEXT, return_type="los")
    with pytest.raises(InputError, match="two tokens or more"):
        lm.run_with_cache(" Paris", return_type="loss", prepend_bos=False)
    with pytest.raises(InputError, match="ids needs two tokens or more"):
        next_token_loss(torch.zeros(1, 1, 5), torch.zeros(1, 1, dtype=torch.long))
    with pytest.raises(InputError, match=r"ids must be \[batch, positions\] ids .* got \[3\] and \[1, 3, 5\]"):
        next_token_loss(torch.zeros(1, 3, 5), torch.zeros(3, dtype=torch.long))


def test_a_padded_position_s_logits_never_reach_the_loss(lm):
    """Whatever a padded position's logits are (a hook's NaN, a float16 overflow), the loss is the
    real predictions' (TL 4.3 masks them out too)."""
    ids, mask = lm.pad([TEXT, "Hello there"], side="right", prepend_bos=True)
    logits = lm.run_with_hooks(ids, attention_mask=mask)
    spoilt = logits.clone()
    spoilt[1, int(mask[1].sum()):] = float("nan")
    assert torch.equal(next_token_loss(spoilt, ids, mask), next_token_loss(logits, ids, mask))
