"""The weights under TransformerLens's names and shapes: `lm.W_Q[layer, head]` and the rest.

TL code reads a model's weights stacked over the blocks and split by head, in the orientation
`x @ W` (inputs on the left): `W_Q`, `W_K`, `W_V` `[layers, heads, d_model, d_head]` (a
LLaMA-family model's keys and values have its key/value heads), `W_O` `[layers, heads, d_head,
d_model]`, `W_in` (a LLaMA-family model's up projection; its gate is `W_gate`) `[layers, d_model,
d_mlp]`, `W_out` `[layers, d_mlp, d_model]`, the biases `b_Q` ... `[layers, heads, d_head]`, `b_O`,
`b_in`, `b_out`, and `W_E` `[vocab, d_model]`, `W_pos` `[positions, d_model]` (GPT-2's), `W_U`
`[d_model, vocab]`, `b_U`.

Each LayerNorm's gain γ and bias β are folded into the weights that read its output, as TL's
`fold_ln=True` does, and nothing more: TL's other default processing (centring the residual
stream's writers and the unembedding, folding the value biases into b_O) is not applied, so
these equal TL's with `center_writing_weights=False, center_unembed=False,
fold_value_biases=False`, not `HookedTransformer.from_pretrained`'s defaults (whose logits are
shifted by a constant per position; differences of logits agree): `W_Q`, `W_K`, `W_V` take ln1's γ on their input rows and `b_Q`... gain
`β @ W`; `W_in` (and `W_gate`) ln2's; `W_U` the final norm's, `b_U` its `β @ W_U` (neither family
has an LM head bias of its own). As TL's, a LayerNorm's readers are then centred over their
input rows (the norm's output has mean 0 there, so that part read nothing). That is the
convention gpt2viz's hooks and ActivationCache follow: `hook_normalized` is the stream centred
and divided by its scale, before γ and β, so `einsum("btc,hcd->bthd", cache["normalized", l,
"ln1"], W_Q[l]) + b_Q[l]` is the queries, and `cache.accumulated_resid(apply_ln=True) @ W_U + b_U` the logits (a LLaMA-family
model's RMSNorm has only γ, and no bias is added). gpt2viz stores the checkpoint's own numbers
(GPT-2's c_attn holds Q, K and V side by side; `lm.model.state_dict()` has them as they are);
a folded weight is made from them on first access and kept until a parameter changes or is replaced. A model in another number format gives its float32
twin's (`lm.float32_twin`), which is what its weights stand for.
"""

from __future__ import annotations

from typing import Any

import torch

from .errors import InputError
from .i18n import N_

__all__ = ["NAMES", "NoSuchWeight", "weight"]

NAMES = ("W_E", "W_pos", "W_U", "b_U", "W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "W_in", "W_gate",
         "W_out", "b_in", "b_out")


class NoSuchWeight(InputError, AttributeError):
    """A weight this model's family does not have (a LLaMA-family model's biases or position
    table, GPT-2's gate): an AttributeError too, so that `hasattr(lm, "W_pos")` answers False."""


def weight(model: Any, name: str) -> torch.Tensor:
    """TransformerLens's weight `name` of `model` (a float32 GPT2 or Llama core), as described above."""
    llama = model.config.architecture == "llama"
    parts = _LLAMA if llama else _GPT2
    if name not in parts:
        if not llama:
            raise NoSuchWeight(name, N_("{setting}: GPT-2's MLP has no gate"))
        if name == "W_pos":
            raise NoSuchWeight(name, N_("{setting}: a LLaMA-family model has no position table (it rotates queries and keys by position)"))
        raise NoSuchWeight(name, N_("{setting}: a LLaMA-family model's products have no biases"))
    with torch.no_grad():
        if name not in _READS_NORM:  # a view of the checkpoint's own tensor: nothing to make
            return parts[name](model.state_dict(), model.config)
        # Made once and kept on the model until a parameter or the kept tensor itself is changed in
        # place (torch's version counters say so) or replaced (a new Parameter, or `.data = ...`: a
        # new tensor at another address): a notebook's `lm.W_U[:, token]` in a loop made three
        # copies of gpt2-small's 154 MB unembedding at each access. The entry holds the tensors it
        # was made from, so that a replaced one's memory cannot be reused at the same address (which
        # would look unchanged) while the entry lives.
        params = list(model.parameters())
        stamp = tuple((id(p), p.data_ptr(), p._version) for p in params)
        kept = vars(model).setdefault("_tl_folded", {})
        hit = kept.get(name)
        if hit is not None and hit[0] == stamp and hit[1]._version == hit[2]:
            return hit[1]
        value = _folded(model, name, parts)
        kept[name] = (stamp, value, value._version, tuple(p.detach() for p in params))
        return value


def _folded(model: Any, name: str, parts: dict) -> torch.Tensor:
    """Weight `name`, which reads a norm's output, with the norm's γ and β folded in (called under
    `weight`'s no_grad)."""
    sd, config = model.state_dict(), model.config
    raw = parts[name](sd, config)
    norm = _READS_NORM[name]
    if name.startswith("W_"):  # γ on the rows of the input (d_model) axis
        gain = _norm_part(sd, config, norm, "weight")
        folded = raw * (gain.unsqueeze(-1) if name == "W_U" else _along_input(gain, raw))
        if config.architecture == "llama":
            return folded
        # A LayerNorm's output has mean 0 over d_model: the weight's mean over its input rows
        # reads nothing, and TL takes it away (fold_ln's centring of the reading weights).
        return folded - folded.mean(dim=-2, keepdim=True)
    # A bias: its own (zeros for the LM head) plus the norm's β through the raw weight.
    shift = _norm_part(sd, config, norm, "bias")
    weight_name = "W" + name[1:]
    if shift is None:  # an RMSNorm has no β
        return raw
    raw_weight = parts[weight_name](sd, config)
    if name == "b_U":
        return raw + shift @ raw_weight
    # [layers, C] through [layers, (heads,) C, out] -> [layers, (heads,) out]
    return raw + torch.einsum("lc,l...co->l...o", shift, raw_weight)


# The weights that read a norm's output, and which norm: ln1 (attention), ln2 (MLP), the final one.
_READS_NORM = {"W_Q": "ln1", "W_K": "ln1", "W_V": "ln1", "b_Q": "ln1", "b_K": "ln1", "b_V": "ln1",
               "W_in": "ln2", "W_gate": "ln2", "b_in": "ln2", "W_U": "final", "b_U": "final"}

_NORM_KEYS = {
    "gpt2": {"ln1": "h.{l}.ln_1.{part}", "ln2": "h.{l}.ln_2.{part}", "final": "ln_f.{part}"},
    "llama": {"ln1": "model.layers.{l}.input_layernorm.{part}", "ln2": "model.layers.{l}.post_attention_layernorm.{part}",
              "final": "model.norm.{part}"},
}


def _norm_part(sd: dict, config: Any, norm: str, part: str) -> torch.Tensor | None:
    """The norm's γ (`part` 'weight') or β ('bias'): `[C]` for the final one, `[layers, C]` for a
    block's; None for an RMSNorm's β."""
    key = _NORM_KEYS["llama" if config.architecture == "llama" else "gpt2"][norm]
    if norm == "final":
        return sd.get(key.format(part=part))
    parts = [sd.get(key.format(l=l, part=part)) for l in range(config.n_layer)]
    return None if parts[0] is None else torch.stack(parts)


def _along_input(gain: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """`gain` `[layers, C]` shaped to multiply the input axis of a stacked weight: `[layers, C, 1]`
    for `[layers, C, out]`, `[layers, 1, C, 1]` for `[layers, heads, C, d_head]`."""
    shape = [gain.size(0)] + [1] * (weight.dim() - 1)
    shape[weight.dim() - 2] = gain.size(1)
    return gain.reshape(shape)


def _stacked(sd: dict, config: Any, read) -> torch.Tensor:
    """`read(sd, prefix)` of every block, stacked on a new first axis."""
    return torch.stack([read(sd, f"h.{l}." if config.architecture != "llama" else f"model.layers.{l}.")
                        for l in range(config.n_layer)])


def _heads_in(w_in_out: torch.Tensor, heads: int) -> torch.Tensor:
    """`[d_model, heads * d_head]` as `[heads, d_model, d_head]`."""
    return w_in_out.reshape(w_in_out.size(0), heads, -1).permute(1, 0, 2)


def _gpt2_qkv(which: int):
    def read(sd: dict, config: Any) -> torch.Tensor:
        C = config.n_embd
        return _stacked(sd, config, lambda sd, p: _heads_in(sd[p + "attn.c_attn.weight"][:, which * C:(which + 1) * C],
                                                             config.n_head))
    return read


def _gpt2_qkv_bias(which: int):
    def read(sd: dict, config: Any) -> torch.Tensor:
        C = config.n_embd
        return _stacked(sd, config, lambda sd, p: sd[p + "attn.c_attn.bias"][which * C:(which + 1) * C].reshape(config.n_head, -1))
    return read


def _plain(key: str):
    """Each block's tensor `key` as it is (Conv1D's weights are already `[in, out]`)."""
    return lambda sd, config: _stacked(sd, config, lambda sd, p: sd[p + key])


_GPT2 = {
    "W_E": lambda sd, config: sd["wte.weight"],
    "W_pos": lambda sd, config: sd["wpe.weight"],
    "W_U": lambda sd, config: sd["wte.weight"].t(),  # tied to the token table
    "b_U": lambda sd, config: sd["wte.weight"].new_zeros(config.vocab_size),
    "W_Q": _gpt2_qkv(0), "W_K": _gpt2_qkv(1), "W_V": _gpt2_qkv(2),
    "b_Q": _gpt2_qkv_bias(0), "b_K": _gpt2_qkv_bias(1), "b_V": _gpt2_qkv_bias(2),
    "W_O": lambda sd, config: _stacked(sd, config, lambda sd, p: sd[p + "attn.c_proj.weight"].reshape(config.n_head, -1, config.n_embd)),
    "b_O": _plain("attn.c_proj.bias"),
    "W_in": _plain("mlp.c_fc.weight"), "b_in": _plain("mlp.c_fc.bias"),
    "W_out": _plain("mlp.c_proj.weight"), "b_out": _plain("mlp.c_proj.bias"),
}


def _llama_in(key: str, heads: str | None = None):
    """Each block's Linear weight `key` (`[out, in]`) turned to `[in, out]`, split by head when
    `heads` names the config's count of them."""
    def read(sd: dict, config: Any) -> torch.Tensor:
        def one(sd: dict, p: str) -> torch.Tensor:
            w = sd[p + key].t()
            return _heads_in(w, getattr(config, heads)) if heads else w
        return _stacked(sd, config, one)
    return read


def _llama_head(sd: dict, config: Any) -> torch.Tensor:
    return sd["lm_head.weight"].t() if "lm_head.weight" in sd else sd["model.embed_tokens.weight"].t()


_LLAMA = {
    "W_E": lambda sd, config: sd["model.embed_tokens.weight"],
    "W_U": _llama_head,
    "b_U": lambda sd, config: sd["model.embed_tokens.weight"].new_zeros(config.vocab_size),
    "W_Q": _llama_in("self_attn.q_proj.weight", "n_head"),
    "W_K": _llama_in("self_attn.k_proj.weight", "n_kv_head"),
    "W_V": _llama_in("self_attn.v_proj.weight", "n_kv_head"),
    "W_O": lambda sd, config: _stacked(sd, config, lambda sd, p: sd[p + "self_attn.o_proj.weight"].t().reshape(
        config.n_head, -1, config.n_embd)),
    "W_in": _llama_in("mlp.up_proj.weight"), "W_gate": _llama_in("mlp.gate_proj.weight"),
    "W_out": _llama_in("mlp.down_proj.weight"),
}
