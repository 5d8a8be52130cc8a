"""The activations of one pass, by hook name, with TransformerLens's analysis methods.

`LanguageModel.run_with_cache` returns an `ActivationCache`: a dict from hook name to tensor (as
before), indexed also as TransformerLens indexes its cache (`cache["pattern", 1]` is
`cache["blocks.1.attn.hook_pattern"]`), holding `hook_q/k/v/z` in TL's layout `[batch, position,
head, d_head]` (TL code's `cache["z", 0][:, :, h]` is head h), and able to take the residual
stream apart:

- `accumulated_resid`: the stream entering each block, and after the last: `[layers + 1, B, T, C]`;
- `decompose_resid`: what each part wrote into it (embeddings, each attention and MLP output);
- `stack_head_results`: each head's own output, `z_h @ W_O[h]` (c_proj's rows of head h);
- `apply_ln_to_stack`: the final LayerNorm of this pass applied to each component: centred and
  divided by the pass's scale (frozen, so the LayerNorm is linear and components add up);
- `logit_attrs`: components, the final LayerNorm applied as above, times the logit directions
  of tokens (TL's: pass the components as they are).

Conventions, as TransformerLens's with `fold_ln=True` (its default): the LayerNorm's gain γ is
part of the logit direction (`logit_attrs` reads `γ ⊙ wte[t]`), not of `apply_ln_to_stack`; its
bias β and c_proj's bias are no component's (TL folds c_proj's bias into `b_O`, the attention
output's bias term, which `decompose_resid` gives as part of each block's `attn_out`;
`stack_head_results` leaves it out). So, at any position,

    logits[t] = sum over decompose_resid's components c of logit_attrs(c, t) + β · wte[t]

which tests/test_activation_cache.py checks against the pass's logits, and
tests/test_transformer_lens.py every method against TransformerLens 4.3 (where it is installed).
`pos_slice` is TL's too: an int keeps that position and drops the axis, a slice keeps the axis.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from .hooks import BLOCK_HOOKS, HookNameError, all_hook_names, hook_name

if TYPE_CHECKING:
    from .model.gpt2 import GPT2

__all__ = ["ActivationCache", "act_name"]

# TransformerLens's short names (utils.get_act_name) for gpt2viz's hook points.
SHORT_NAMES = {
    "embed": "hook_embed", "pos_embed": "hook_pos_embed",
    **{name.split(".")[-1].removeprefix("hook_"): name for name in BLOCK_HOOKS if name.startswith(("attn.", "mlp."))},
    **{name.removeprefix("hook_"): name for name in BLOCK_HOOKS if "." not in name},
}


def act_name(name: str, layer: int | None = None, layer_type: str | None = None) -> str:
    """The full hook name of TransformerLens's short `name` in block `layer`: ('pattern', 1) is
    'blocks.1.attn.hook_pattern', ('resid_pre', 0) 'blocks.0.hook_resid_pre', ('scale', 2, 'ln1')
    'blocks.2.ln1.hook_scale', ('scale', None) 'ln_final.hook_scale'. A full name is itself."""
    if name in ("scale", "normalized"):
        if layer is None:
            return f"ln_final.hook_{name}"
        return hook_name(f"{layer_type or 'ln1'}.hook_{name}", layer)
    if name in ("embed", "pos_embed"):
        return SHORT_NAMES[name]
    full = SHORT_NAMES.get(name)
    if full is None or layer is None:
        return name
    return hook_name(full, layer)


class ActivationCache(dict):
    """Hook name -> activation of one pass (`LanguageModel.run_with_cache`), and the analyses
    of the module's doc. Components are stacked on a new first axis; pass `pos_slice` (an int or
    a slice) to keep some positions only."""

    def __init__(self, model: GPT2) -> None:
        super().__init__()
        self.model = model

    def __getitem__(self, key: Any) -> torch.Tensor:
        if isinstance(key, tuple):
            key = act_name(*key)
        if not dict.__contains__(self, key):
            raise HookNameError(str(key), tuple(self) or tuple(all_hook_names(self.model.config.n_layer)))
        return dict.__getitem__(self, key)

    # -- the residual stream taken apart -------------------------------------------------------
    def accumulated_resid(
        self, layer: int | None = None, incl_mid: bool = False, apply_ln: bool = False, pos_slice: Any = None,
        return_labels: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, list[str]]:
        """The residual stream entering blocks 0 .. `layer` (default: every block, and after the
        last one, "final_post"), `[components, B, T, C]`; `incl_mid` adds each block's stream
        between attention and MLP. Labels as TransformerLens's ("0_pre", "0_mid", ..., "final_post").
        `apply_ln` normalises each stream by its own scale, as the final LayerNorm would if the
        stream ended there (TL's recompute_ln: the logit lens)."""
        n_layer = self.model.config.n_layer
        whole = layer is None or layer == n_layer
        parts, labels = [], []
        for l in range(n_layer if whole else layer + 1):
            parts.append(self[hook_name("hook_resid_pre", l)])
            labels.append(f"{l}_pre")
            if incl_mid and (whole or l < layer):
                parts.append(self[hook_name("hook_resid_mid", l)])
                labels.append(f"{l}_mid")
        if whole:
            parts.append(self[hook_name("hook_resid_post", n_layer - 1)])
            labels.append("final_post")
        stack = torch.stack([_positions(p, pos_slice) for p in parts])
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, recompute_ln=True)
        return (stack, labels) if return_labels else stack

    def decompose_resid(
        self, layer: int | None = None, mode: str = "all", apply_ln: bool = False, pos_slice: Any = None,
        incl_embeds: bool = True, return_labels: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, list[str]]:
        """What each part wrote into the stream before block `layer` (default: all of it):
        embed, pos_embed, then each block's attn_out and mlp_out (`mode` "attn" or "mlp" keeps
        one kind), `[components, B, T, C]`. Their sum is the stream itself."""
        n_layer = self.model.config.n_layer
        last = n_layer if layer is None else layer
        parts, labels = [], []
        if incl_embeds:
            parts += [self["hook_embed"], self["hook_pos_embed"]]
            labels += ["embed", "pos_embed"]
        for l in range(last):
            if mode in ("all", "attn"):
                parts.append(self[hook_name("hook_attn_out", l)])
                labels.append(f"{l}_attn_out")
            if mode in ("all", "mlp"):
                parts.append(self[hook_name("hook_mlp_out", l)])
                labels.append(f"{l}_mlp_out")
        return self._finish(parts, labels, apply_ln, pos_slice, return_labels)

    def stack_head_results(
        self, layer: int = -1, apply_ln: bool = False, pos_slice: Any = None, return_labels: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, list[str]]:
        """Each head's own output into the stream, `z_h @ W_O[h]` (c_proj's rows of head h, its
        bias left out), for the heads of blocks 0 .. `layer` - 1 (-1: every block),
        `[heads, B, T, C]`, labels "L0H0", "L0H1", ..."""
        config = self.model.config
        last = config.n_layer if layer == -1 else layer
        parts, labels = [], []
        for l in range(last):
            z = self[hook_name("attn.hook_z", l)]  # [B, T, nh, hd], TL's layout
            parts += list(head_results(self.model, l, z.transpose(1, 2)))
            labels += [f"L{l}H{h}" for h in range(config.n_head)]
        return self._finish(parts, labels, apply_ln, pos_slice, return_labels)

    # -- the final LayerNorm and the logits ----------------------------------------------------
    def apply_ln_to_stack(
        self, stack: torch.Tensor, layer: int | None = None, mlp_input: bool = False, pos_slice: Any = None,
        recompute_ln: bool = False,
    ) -> torch.Tensor:
        """The final LayerNorm of this pass applied to each component of `stack` `[..., B, T, C]`
        (`layer` None or -1; a block's number applies its ln1's scale, or ln2's with `mlp_input`):
        centred and divided by the pass's scale, at the positions of `pos_slice` (the stack's
        own are taken as already sliced). The gain γ is the logit direction's (`logit_attrs`).
        `recompute_ln`: each component divided by its own scale instead."""
        centred = stack - stack.mean(dim=-1, keepdim=True)
        if recompute_ln:
            eps = self.model.config.layer_norm_epsilon
            return centred / (centred.pow(2).mean(dim=-1, keepdim=True) + eps).sqrt()
        if layer is None or layer == -1:
            name = "ln_final.hook_scale"
        else:
            name = hook_name("ln2.hook_scale" if mlp_input else "ln1.hook_scale", layer)
        return centred / _positions(self[name], pos_slice)  # scale [B, T, 1]

    def logit_attrs(
        self, stack: torch.Tensor, tokens: Any, incorrect_tokens: Any = None, pos_slice: Any = None
    ) -> torch.Tensor:
        """Each component's direct contribution to the logits of `tokens` (an id, or a tensor of
        ids broadcast against the stack's batch and positions): the component, the final
        LayerNorm applied (`apply_ln_to_stack`, at `pos_slice`), times `γ ⊙ wte[token]`. With
        `incorrect_tokens`, the contribution to the difference of the two logits."""
        direction = self._direction(tokens)
        if incorrect_tokens is not None:
            direction = direction - self._direction(incorrect_tokens)
        return (self.apply_ln_to_stack(stack, pos_slice=pos_slice) * direction).sum(-1)

    def _direction(self, tokens: Any) -> torch.Tensor:
        ids = torch.as_tensor(tokens, device=self.model.device)
        return self.model.ln_f.weight * self.model.wte.lookup(ids)  # [..., C]

    def _finish(
        self, parts: list[torch.Tensor], labels: list[str], apply_ln: bool, pos_slice: Any, return_labels: bool
    ) -> torch.Tensor | tuple[torch.Tensor, list[str]]:
        stack = torch.stack([_positions(p, pos_slice) for p in parts])
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, pos_slice=pos_slice)
        return (stack, labels) if return_labels else stack


def _positions(t: torch.Tensor, pos_slice: Any) -> torch.Tensor:
    """`t` `[B, T, ...]` at the positions of `pos_slice`, as TransformerLens's Slice: None all, an
    int that position (the axis dropped), a slice or a list of positions those (the axis kept)."""
    return t if pos_slice is None else t[:, pos_slice]


def attention_out_product(model, layer: int):
    """The product that mixes block `layer`'s heads back into the residual stream: GPT-2's c_proj
    (with its bias), a LLaMA-family model's o_proj (none)."""
    if model.config.architecture == "llama":
        return model.model.layers[layer].self_attn.o_proj
    return model.h[layer].attn.c_proj


def head_results(model: GPT2, layer: int, z: torch.Tensor) -> torch.Tensor:
    """Each head's output of block `layer` through c_proj alone (its rows of the weight, the
    bias left out): `[nh, B, T, C]` from z `[B, nh, T, hd]`. Through the layer itself, the other
    heads' inputs zeroed, so that every number format's c_proj works (int8 included)."""
    config = model.config
    c_proj = attention_out_product(model, layer)
    B, nh, T, hd = z.shape
    alone = torch.zeros(nh, B, T, nh, hd, dtype=z.dtype, device=z.device)
    for h in range(nh):
        alone[h, :, :, h] = z[:, h]
    zero = torch.zeros(1, config.n_embd, dtype=z.dtype, device=z.device)
    return c_proj(alone.reshape(nh, B, T, nh * hd)) - c_proj(zero)[0]
