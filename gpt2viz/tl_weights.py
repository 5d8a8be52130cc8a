"""The weights under TransformerLens's names and shapes: `lm.W_Q[layer, head]` and the rest.

TL code reads a model's weights stacked over the blocks and split by head, in the orientation
`x @ W` (inputs on the left): `W_Q`, `W_K`, `W_V` `[layers, heads, d_model, d_head]` (a
LLaMA-family model's keys and values have its key/value heads), `W_O` `[layers, heads, d_head,
d_model]`, `W_in` (a LLaMA-family model's up projection; its gate is `W_gate`) `[layers, d_model,
d_mlp]`, `W_out` `[layers, d_mlp, d_model]`, the biases `b_Q` ... `[layers, heads, d_head]`, `b_O`,
`b_in`, `b_out`, and `W_E` `[vocab, d_model]`, `W_pos` `[positions, d_model]` (GPT-2's), `W_U`
`[d_model, vocab]`, `b_U` (zeros: neither family has an LM head bias). These are the
checkpoint's own numbers, as TL's Bridge gives them without weight processing (no LayerNorm
folded in); gpt2viz stores them as the checkpoint does (GPT-2's c_attn holds Q, K and V side by
side), so each is a view of them rearranged. A model in another number format gives its float32
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
        return parts[name](model.state_dict(), model.config)


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
