"""The activations of one pass, by hook name, with TransformerLens's analysis methods.

`LanguageModel.run_with_cache` returns an `ActivationCache`: a dict from hook name to tensor (as
before), indexed also as TransformerLens indexes its cache (`cache["pattern", 1]` is
`cache["blocks.1.attn.hook_pattern"]`), holding `hook_q/k/v/z` in TL's layout `[batch, position,
head, d_head]` (TL code's `cache["z", 0][:, :, h]` is head h), and able to take the residual
stream apart:

- `accumulated_resid`: the stream entering each block, and after the last: `[layers + 1, B, T, C]`;
- `decompose_resid`: what each part wrote into it (embeddings, each attention and MLP output);
- `stack_head_results`: each head's own output, `z_h @ W_O[h]` (c_proj's rows of head h);
- `get_neuron_results`, `stack_neuron_results`: each MLP neuron's own output, its activation
  (`hook_post`) times its row of the MLP's output weight;
- `get_full_resid_decomposition`: the stream entering a block as every head, every neuron (or
  each MLP), the embeddings and the biases added up on the way;
- `apply_ln_to_stack`: a LayerNorm of this pass (the final one, or a block's ln1 or ln2) applied to
  each component: centred and divided by the pass's scale (frozen, so the LayerNorm is linear and
  components add up);
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
`remove_batch_dim()` (or `run_with_cache(..., remove_batch_dim=True)`) drops the batch axis of a
cache of one text, as TL's; the methods then return no batch axis either.
"""

from __future__ import annotations

import operator
import re
from typing import TYPE_CHECKING, Any

import torch

from .errors import InputError, TokenIdError
from .hooks import STEP_HOOKS, HookNameError
from .i18n import N_
from .input_files import shown
from .model.layers import Conv1D
from .model.llama import Linear

if TYPE_CHECKING:
    from .model.gpt2 import GPT2
    from .model.tokenizer import Tokenizer

__all__ = ["ActivationCache", "act_name"]

# TransformerLens's other names for some short names (utils.get_act_name's act_name_alias).
ALIASES = {"attn": "pattern", "attn_logits": "attn_scores", "key": "k", "query": "q", "value": "v",
           "mlp_pre": "pre", "mlp_mid": "mid", "mlp_post": "post"}
ATTENTION_NAMES = ("k", "v", "q", "z", "rot_k", "rot_q", "result", "pattern", "attn_scores")
MLP_NAMES = ("pre", "post", "mid", "pre_linear")
LAYER_TYPES = {"a": "attn", "m": "mlp", "b": "", "block": "", "blocks": "", "attention": "attn"}
MODES = ("all", "attn", "mlp")
SHORT_NAME = re.compile(r"([a-z_]+?)(\d+)([a-z]\w*)?")  # TL's 'k6a': a name, a layer, a layer type


def act_name(name: str, layer: int | None = None, layer_type: str | None = None) -> str:
    """The full hook name of TransformerLens's short `name` in block `layer`, as TL's
    `utils.get_act_name` makes it: ('pattern', 1) is 'blocks.1.attn.hook_pattern' (also
    ('attn', 1)), ('resid_pre', 0) 'blocks.0.hook_resid_pre', ('scale', 2, 'ln2')
    'blocks.2.ln2.hook_scale' (ln1 when no layer type is given), ('scale', None)
    'ln_final.hook_scale', ('embed', None) 'hook_embed'. A full name is itself. As TL's, a name
    may carry its layer and layer type: 'k6a' is ('k', 6, 'a'): 'blocks.6.attn.hook_k',
    'scale4ln1' 'blocks.4.ln1.hook_scale', 'resid_pre2' 'blocks.2.hook_resid_pre'."""
    if "." in name or name.startswith("hook_"):
        return name
    packed = SHORT_NAME.fullmatch(name) if layer is None and layer_type is None else None
    if packed is not None:
        name, layer, layer_type = packed.group(1), int(packed.group(2)), packed.group(3) or None
    name = ALIASES.get(name, name)
    if name in ("scale", "normalized"):
        if layer is None:
            return f"ln_final.hook_{name}"
        layer_type = layer_type or "ln1"
    elif name in ATTENTION_NAMES:
        layer_type = "attn"
    elif name in MLP_NAMES:
        layer_type = "mlp"
    elif layer_type in LAYER_TYPES:
        layer_type = LAYER_TYPES[layer_type]
    parts = ([] if layer is None else ["blocks", str(layer)]) + ([layer_type] if layer_type else []) + [f"hook_{name}"]
    return ".".join(parts)


class ActivationCache(dict):
    """Hook name -> activation of one pass (`LanguageModel.run_with_cache`), and the analyses
    of the module's doc. Components are stacked on a new first axis; pass `pos_slice` (an int or
    a slice) to keep some positions only. `layer` arguments are TL's: None or -1 is after the
    last block, a block's number is the stream entering it."""

    def __init__(self, model: GPT2, tokenizer: Tokenizer | None = None) -> None:
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer  # for tokens given as text (logit_attrs)
        self.has_batch_dim = True  # False after remove_batch_dim

    def remove_batch_dim(self) -> ActivationCache:
        """Every activation without its batch axis, in place, as TransformerLens's: a cache of
        one text only (`cache["pattern", 0]` is then `[head, query, key]`). The analysis methods
        go on working and leave the batch axis out of what they return. Returns the cache."""
        if not self.has_batch_dim:
            return self  # already removed (TL warns and does nothing)
        sizes = {value.size(0) for value in self.values() if value.dim()}
        if sizes - {1}:
            refuse_several_texts(max(sizes))
        for name, value in self.items():
            dict.__setitem__(self, name, value[0] if value.dim() else value)
        self.has_batch_dim = False
        return self

    def apply_slice_to_batch_dim(self, batch_slice: Any) -> ActivationCache:
        """A new cache of some rows of the batch, as TL's (tl_slice): an int keeps that row (the
        batch axis dropped, as `remove_batch_dim`), None all, a slice, a tuple or a list of rows those."""
        if not self.has_batch_dim:
            raise InputError("batch_slice", N_("{setting}: this cache has no batch axis left (remove_batch_dim)"))
        sliced = ActivationCache(self.model, self.tokenizer)
        for name, value in self.items():
            dict.__setitem__(sliced, name, _sliced(value, 0, batch_slice, "batch_slice"))
        sliced.has_batch_dim = not isinstance(batch_slice, int)
        return sliced

    def compute_head_results(self) -> None:
        """Each head's result (`stack_head_results`'s) kept under `blocks.{l}.attn.hook_result`,
        `[B, T, head, C]`, as TL's `compute_head_results` keeps them (the heads and c_proj's bias
        add up to `attn_out`)."""
        for layer in range(self.model.config.n_layer):
            dict.__setitem__(self, act_name("result", layer), self._head_results(layer).movedim(0, -2))

    def __repr__(self) -> str:  # a dict's would print every tensor
        return f"ActivationCache with keys {list(self)}"

    def _name(self, key: Any) -> Any:
        """The hook name a key stands for: a full name, TL's short name ('embed'), or a tuple
        (name, layer[, layer_type]) whose negative layer counts from the end, as TL's does."""
        if isinstance(key, tuple) and key and isinstance(key[0], str):
            name, *rest = key
            if rest and isinstance(rest[0], int) and not isinstance(rest[0], bool) and rest[0] < 0:
                rest[0] += self.model.config.n_layer
            return act_name(name, *rest)
        if isinstance(key, str) and not dict.__contains__(self, key) and key not in self.model.hooks.names:
            return act_name(key)  # ('sample' and 'kv_cache' are the model's own names, not short ones)
        return key

    def __getitem__(self, key: Any) -> torch.Tensor:
        name = self._name(key)
        if not dict.__contains__(self, name):
            model_names = tuple(self.model.hooks.names)
            if name in STEP_HOOKS:
                raise HookNameError.never_cached(name)
            if name in model_names:
                raise HookNameError.not_kept(name, len(self))
            raise HookNameError(str(name), model_names or tuple(self))
        return dict.__getitem__(self, name)

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, self._name(key))

    def get(self, key: Any, default: Any = None) -> Any:
        return self[key] if key in self else default

    def to(self, device: str | torch.device) -> ActivationCache:
        """Every activation moved to `device`, in place; returns the cache (TL's `to`). A dtype is
        refused: the analyses multiply the activations by the model's weights, which stay as they are."""
        if isinstance(device, torch.dtype):
            raise InputError("device", N_("{setting} must be a device such as 'cpu', got the dtype {value}: the "
                                          "analyses multiply by the model's weights, which keep theirs"),
                             value=str(device).removeprefix("torch."))
        for name, value in self.items():
            dict.__setitem__(self, name, value.to(device))
        return self

    def stack_activation(self, activation_name: str, layer: int | None = -1, sublayer_type: str | None = None) -> torch.Tensor:
        """`activation_name` (a short or full block name) of blocks 0 .. `layer` - 1 (-1 or None:
        every block) stacked on a new first axis, `[layers, ...]`, as TL's `stack_activation`."""
        layer = self._layer(layer)
        if layer == 0:
            raise InputError("layer", N_("{setting}: no block comes before block 0, so there is nothing to stack"))
        return torch.stack([self[activation_name, l, sublayer_type] for l in range(layer)])

    # -- arguments as TransformerLens takes them -----------------------------------------------
    def _layer(self, layer: Any) -> int:
        """A `layer` argument as a block number, None and -1 being n_layer (after the last)."""
        n_layer = self.model.config.n_layer
        if layer is None or (isinstance(layer, int) and layer == -1):
            return n_layer
        if not isinstance(layer, int) or isinstance(layer, bool) or not 0 <= layer <= n_layer:
            raise InputError("layer", N_("{setting} must be a block from 0 to {last}, or -1 or None for after the last, got {value}"),
                             last=n_layer, value=shown(layer))
        return layer

    def _is_gpt2(self) -> bool:
        """GPT-2 adds a position vector (a LLaMA-family model rotates instead) and centres in its
        LayerNorms (a LLaMA-family model's RMSNorm does not)."""
        return self.model.config.architecture != "llama"

    # -- the residual stream taken apart -------------------------------------------------------
    def accumulated_resid(
        self, layer: int | None = None, incl_mid: bool = False, apply_ln: bool = False, pos_slice: Any = None,
        mlp_input: bool = False, return_labels: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, list[str]]:
        """The residual stream entering blocks 0 .. `layer` (default: every block, and after the
        last one, "final_post"), `[components, B, T, C]`; `incl_mid` adds each earlier block's
        stream between attention and MLP, `mlp_input` block `layer`'s. Labels as TransformerLens's
        ("0_pre", "0_mid", ..., "final_post"). `apply_ln`: after the last block, each stream
        normalised by its own scale, as the final LayerNorm would if the stream ended there (the
        logit lens); at a block, by the scale its ln1 (ln2 with `mlp_input`) had in this pass."""
        n_layer = self.model.config.n_layer
        layer = self._layer(layer)
        parts, labels = [], []
        for l in range(layer + 1):
            if l == n_layer:
                parts.append(self["resid_post", n_layer - 1])
                labels.append("final_post")
                continue
            parts.append(self["resid_pre", l])
            labels.append(f"{l}_pre")
            if (incl_mid and l < layer) or (mlp_input and l == layer):
                parts.append(self["resid_mid", l])
                labels.append(f"{l}_mid")
        stack = torch.stack([_positions(p, pos_slice) for p in parts])
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, layer, mlp_input, pos_slice, recompute_ln=layer == n_layer)
        return (stack, labels) if return_labels else stack

    def decompose_resid(
        self, layer: int | None = None, mlp_input: bool = False, mode: str = "all", apply_ln: bool = False,
        pos_slice: Any = None, incl_embeds: bool = True, return_labels: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, list[str]]:
        """What each part wrote into the stream before block `layer` (default: all of it):
        embed, pos_embed (a GPT-2's), then each block's attn_out and mlp_out (`mode` "attn" or
        "mlp" keeps one kind; `mlp_input` adds block `layer`'s attn_out), `[components, B, T, C]`.
        Their sum is the stream itself."""
        if mode not in MODES:
            raise InputError("mode", N_("{setting} must be 'all', 'attn' or 'mlp', got {value}"), value=shown(mode))
        layer = self._layer(layer)
        self._check_mlp_input(layer, mlp_input)
        parts, labels = self._embeddings() if incl_embeds else ([], [])
        for l in range(layer):
            if mode != "mlp":
                parts.append(self["attn_out", l])
                labels.append(f"{l}_attn_out")
            if mode != "attn":
                parts.append(self["mlp_out", l])
                labels.append(f"{l}_mlp_out")
        if mlp_input and mode != "mlp":
            parts.append(self["attn_out", layer])
            labels.append(f"{layer}_attn_out")
        return self._finish(parts, labels, layer, mlp_input, apply_ln, pos_slice, return_labels)

    def stack_head_results(
        self, layer: int | None = -1, return_labels: bool = False, incl_remainder: bool = False, pos_slice: Any = None,
        apply_ln: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, list[str]]:
        """Each head's own output into the stream, `z_h @ W_O[h]` (c_proj's rows of head h, its
        bias left out), for the heads of blocks 0 .. `layer` - 1 (-1 or None: every block),
        `[heads, B, T, C]`, labels "L0H0", "L0H1", ... (none before block 0: an empty stack).
        `incl_remainder` adds the rest of the stream entering block `layer` ("remainder")."""
        layer = self._layer(layer)
        n_head = self.model.config.n_head
        parts, labels = [], []
        for l in range(layer):
            parts += list(self._head_results(l))
            labels += [f"L{l}H{h}" for h in range(n_head)]
        if incl_remainder:
            stream = self._stream_into(layer, False)
            parts.append(stream - sum(parts) if parts else stream)
            labels.append("remainder")
        return self._finish(parts, labels, layer, False, apply_ln, pos_slice, return_labels)

    def get_neuron_results(self, layer: int, neuron_slice: Any = None, pos_slice: Any = None) -> torch.Tensor:
        """Each neuron's own output into the stream from block `layer`'s MLP, as TL's: its
        activation (`hook_post`) times its row of the MLP's output weight (GPT-2's c_proj, a
        LLaMA-family model's down_proj), `[B, T, neurons, C]`. `neuron_slice` as `pos_slice`:
        None all, an int one (the axis dropped), a slice or a list of neurons those. Their sum
        and the output's bias make the block's `mlp_out`."""
        layer = self._block(layer)
        acts = _positions(self["post", layer], pos_slice)  # [..., d_mlp]
        rows = neuron_rows(self.model, layer, acts)  # [d_mlp, C]
        if neuron_slice is not None:
            acts, rows = _sliced(acts, -1, neuron_slice, "neuron_slice"), _sliced(rows, 0, neuron_slice, "neuron_slice")
        return acts[..., None] * rows

    def stack_neuron_results(
        self, layer: int | None = -1, pos_slice: Any = None, neuron_slice: Any = None, return_labels: bool = False,
        incl_remainder: bool = False, apply_ln: bool = False, mlp_input: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, list[str]]:
        """The neurons' results (`get_neuron_results`) of blocks 0 .. `layer` - 1 (-1 or None:
        every block) stacked, `[neurons, B, T, C]`, labels "L0N0", "L0N1", ... as TL's (an int
        `neuron_slice` keeps the axis here). Memory: layers x neurons x positions x C numbers
        (gpt2-small: 113 MB a position). `incl_remainder` adds the rest of the stream entering
        block `layer` (its MLP with `mlp_input`); `apply_ln` as `stack_head_results`."""
        layer = self._layer(layer)
        d_mlp = self.model.config.d_mlp
        if isinstance(neuron_slice, int) and not isinstance(neuron_slice, bool):
            neuron_slice = [neuron_slice]
        picked = _sliced(torch.arange(d_mlp), 0, neuron_slice, "neuron_slice")
        labels = [f"L{l}N{n}" for l in range(layer) for n in picked.tolist()]
        stack = torch.cat([self.get_neuron_results(l, neuron_slice, pos_slice).movedim(-2, 0) for l in range(layer)]) \
            if layer else self._empty_stack(pos_slice)
        if incl_remainder:
            stream = _positions(self._stream_into(layer, mlp_input), pos_slice)
            stack = torch.cat([stack, (stream - stack.sum(0))[None]])
            labels.append("remainder")
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, layer, mlp_input, pos_slice)
        return (stack, labels) if return_labels else stack

    def get_full_resid_decomposition(
        self, layer: int | None = None, mlp_input: bool = False, expand_neurons: bool = True, apply_ln: bool = False,
        pos_slice: Any = None, return_labels: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, list[str]]:
        """The stream entering block `layer` (default: after the last block; its MLP with
        `mlp_input`) taken apart as TL's: every head's result, every neuron's (`expand_neurons`;
        else each block's mlp_out), embed, pos_embed (a GPT-2's), and "bias", the output biases
        added on the way (c_proj's of each attention, and of each MLP when the neurons are
        expanded). The components add up to the stream. `[components, B, T, C]`."""
        layer = self._layer(layer)
        self._check_mlp_input(layer, mlp_input)
        heads, labels = self.stack_head_results(layer + int(mlp_input), return_labels=True, pos_slice=pos_slice)
        parts = [heads]
        if layer:
            if expand_neurons:
                mlps, more = self.stack_neuron_results(layer, pos_slice=pos_slice, return_labels=True)
            else:
                mlps, more = self.decompose_resid(layer, mode="mlp", pos_slice=pos_slice, incl_embeds=False,
                                                  return_labels=True)
            parts.append(mlps)
            labels += more
        embeds, embed_labels = self._embeddings()
        parts += [_positions(e, pos_slice)[None] for e in embeds]
        labels += embed_labels
        bias = self._accumulated_bias(layer, mlp_input, expand_neurons, like=heads)
        parts.append(bias.expand(1, *heads.shape[1:]))
        labels.append("bias")
        stack = torch.cat(parts)
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, layer, mlp_input, pos_slice)
        return (stack, labels) if return_labels else stack

    def _accumulated_bias(self, layer: int, mlp_input: bool, include_mlp: bool, like: torch.Tensor) -> torch.Tensor:
        """The output biases the blocks before `layer` added to the stream (each attention's, and
        each MLP's with `include_mlp`), block `layer`'s attention's too with `mlp_input`: `[C]`."""
        model, total = self.model, like.new_zeros(self.model.config.n_embd)
        for l in range(layer + int(mlp_input)):
            total = total + output_bias(attention_out_product(model, l), model.config.n_embd, like)
            if include_mlp and l < layer:
                total = total + output_bias(mlp_out_product(model, l), model.config.d_mlp, like)
        return total

    def _embeddings(self) -> tuple[list[torch.Tensor], list[str]]:
        """What the stream starts as: the token embeddings, and a GPT-2's position embeddings (a
        LLaMA-family model rotates instead). A cache without them is a HookNameError."""
        if self._is_gpt2():
            return [self["hook_embed"], self["hook_pos_embed"]], ["embed", "pos_embed"]
        return [self["hook_embed"]], ["embed"]

    def _head_results(self, layer: int) -> torch.Tensor:
        """Block `layer`'s heads' results (`head_results`), `[nh, B, T, C]` (`[nh, T, C]` without
        the batch axis), from its z in TL's layout `[B, T, nh, hd]`."""
        z = self["z", layer]
        results = head_results(self.model, layer, (z if self.has_batch_dim else z[None]).transpose(1, 2))
        return results if self.has_batch_dim else results[:, 0]

    def _check_mlp_input(self, layer: int, mlp_input: bool) -> None:
        """`mlp_input` names block `layer`'s MLP: there is none after the last block."""
        if mlp_input and layer == self.model.config.n_layer:
            raise InputError("mlp_input", N_("{setting} needs a block's MLP: layer {layer} is after the last block"),
                             layer=layer)

    def _stream_into(self, layer: int, mlp_input: bool) -> torch.Tensor:
        """The stream entering block `layer` (its MLP with `mlp_input`; after the last block: the end)."""
        if mlp_input:
            return self["resid_mid", layer]
        return self["resid_post", layer - 1] if layer else self["resid_pre", 0]

    def _empty_stack(self, pos_slice: Any) -> torch.Tensor:
        """No components, shaped as the stream at `pos_slice` (TL's empty stack before block 0)."""
        like = _positions(self["hook_embed"], pos_slice)
        return like.new_zeros(0, *like.shape)

    def _block(self, layer: Any) -> int:
        """A block's number, a negative one counting from the end (as TL's indexing)."""
        n_layer = self.model.config.n_layer
        if not isinstance(layer, int) or isinstance(layer, bool) or not -n_layer <= layer < n_layer:
            raise InputError("layer", N_("{setting} must be a block from 0 to {last}, got {value}"),
                             last=n_layer - 1, value=shown(layer))
        return layer % n_layer

    # -- the LayerNorms and the logits ---------------------------------------------------------
    def apply_ln_to_stack(
        self, stack: torch.Tensor, layer: int | None = None, mlp_input: bool = False, pos_slice: Any = None,
        recompute_ln: bool = False,
    ) -> torch.Tensor:
        """A LayerNorm of this pass applied to each component of `stack` `[..., B, T, C]`: the
        final one (`layer` None, -1 or n_layer), or block `layer`'s ln1 (ln2 with `mlp_input`).
        Centred (a LLaMA-family model's RMSNorm does not centre) and divided by the scale it had
        in this pass, at the positions of `pos_slice` (the stack's own are taken as already
        sliced), so the norm is linear and components add up. The gain γ is the logit
        direction's (`logit_attrs`). `recompute_ln`: each component divided by its own scale."""
        layer = self._layer(layer)
        centred = stack - stack.mean(dim=-1, keepdim=True) if self._is_gpt2() else stack
        if recompute_ln:
            eps = self.model.config.norm_eps
            return centred / (centred.pow(2).mean(dim=-1, keepdim=True) + eps).sqrt()
        if layer == self.model.config.n_layer:
            scale = self["ln_final.hook_scale"]
        else:
            scale = self["scale", layer, "ln2" if mlp_input else "ln1"]
        normed = centred / _positions(scale, pos_slice)  # scale [B, T, 1]
        if normed.shape != stack.shape:  # the stack's positions are not the scale's: broadcasting would make a grid
            raise InputError("stack", N_("{setting} {shape} does not fit this cache's scale at pos_slice {value}: "
                                         "give apply_ln_to_stack the pos_slice the stack was made with"),
                             shape=list(stack.shape), value=shown(pos_slice))
        return normed

    def logit_attrs(
        self, stack: torch.Tensor, tokens: Any, incorrect_tokens: Any = None, pos_slice: Any = None
    ) -> torch.Tensor:
        """Each component's direct contribution to the logits of `tokens` (an id, a text of one
        token, or a tensor of ids broadcast against the stack's batch and positions): the
        component, the final LayerNorm applied (`apply_ln_to_stack`, at `pos_slice`), times
        `γ ⊙ W_U[token]`. A `[batch]` tensor is one token per row of a `[components, batch,
        positions, C]` stack, as TransformerLens reads it. With `incorrect_tokens` (of the same
        shape), the contribution to the difference of the two logits."""
        ids = self._token_ids(tokens, "tokens")
        direction = self._direction(ids)
        if incorrect_tokens is not None:
            other = self._token_ids(incorrect_tokens, "incorrect_tokens")
            if other.shape != ids.shape:
                raise InputError("incorrect_tokens", N_("{setting} must have the shape of tokens, {shape}, got {value}"),
                                 shape=list(ids.shape), value=list(other.shape))
            direction = direction - self._direction(other)
        normed = self.apply_ln_to_stack(stack, pos_slice=pos_slice)
        if normed.dim() == 4 and direction.dim() == 2 and direction.size(0) == normed.size(1):
            direction = direction.unsqueeze(-2)  # [batch]: one token per row, at every position (TL's rule)
        return (normed * direction).sum(-1)

    def _token_ids(self, tokens: Any, setting: str) -> torch.Tensor:
        """`tokens` as a tensor of ids of the vocabulary (a text must be exactly one token)."""
        vocab = self.model.config.vocab_size
        if isinstance(tokens, str):
            if self.tokenizer is None:
                raise InputError(setting, N_("{setting}: a text needs the cache's tokenizer (run_with_cache's has one); "
                                             "give token ids"))
            ids = self.tokenizer.encode(tokens)
            if len(ids) != 1:
                raise InputError(setting, N_("{setting} must be a text of one token, got {value} ({count} tokens)"),
                                 value=shown(tokens), count=len(ids))
            return torch.tensor(ids[0], device=self.model.device)
        ids = tokens
        if not isinstance(ids, torch.Tensor):
            try:
                ids = torch.tensor(ids if isinstance(ids, (list, tuple)) else operator.index(ids))
            except (TypeError, ValueError, RuntimeError, OverflowError):
                ids = None
        if ids is None or ids.dtype == torch.bool or ids.is_floating_point() or ids.is_complex():
            bad: Any = tokens
        else:
            outside = (ids < 0) | (ids >= vocab)
            if not bool(outside.any()):
                return ids.to(self.model.device)
            bad = int(ids[outside].flatten()[0])
        raise TokenIdError(setting, N_("{setting} must be a token id from 0 to {last}, got {value}"),
                           last=vocab - 1, value=shown(bad))

    def _direction(self, ids: torch.Tensor) -> torch.Tensor:
        return _final_norm(self.model).weight * unembedding_rows(self.model, ids)  # [..., C]

    def _finish(
        self, parts: list[torch.Tensor], labels: list[str], layer: int, mlp_input: bool, apply_ln: bool,
        pos_slice: Any, return_labels: bool,
    ) -> torch.Tensor | tuple[torch.Tensor, list[str]]:
        if parts:
            stack = torch.stack([_positions(p, pos_slice) for p in parts])
        else:  # nothing before block 0 (no heads, or no embeddings asked for): an empty stack, as TL's
            stack = self._empty_stack(pos_slice)
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, layer, mlp_input, pos_slice)
        return (stack, labels) if return_labels else stack


def refuse_several_texts(count: int) -> None:
    """The InputError of `remove_batch_dim` on a batch of `count` texts (run_with_cache says it
    before its pass)."""
    raise InputError("remove_batch_dim", N_("{setting}: only a cache of one text has a batch axis to drop; "
                                            "this one holds {count}"), count=count)


def tl_slice(value: Any) -> Any:
    """An index as TransformerLens's `Slice` reads it: None all, a tuple the arguments of a
    slice ((0, 2) is 0:2), an int that one (its axis dropped), a slice, a list or a tensor of
    indices those; a TransformerLens `Slice` itself as what it holds (its `.slice`)."""
    if value is None:
        return slice(None)
    if hasattr(value, "slice") and hasattr(value, "apply") and hasattr(value, "mode"):  # TL's Slice
        held = value.slice
        return held if isinstance(held, (int, slice)) else torch.as_tensor(held)
    return slice(*value) if isinstance(value, tuple) else value


def _sliced(t: torch.Tensor, dim: int, value: Any, setting: str) -> torch.Tensor:
    """`t` indexed by `value` (tl_slice) on axis `dim`; an index outside it is an InputError."""
    index = tl_slice(value)
    try:
        return t[(slice(None),) * (dim % t.dim()) + (index,)]
    except (IndexError, TypeError, ValueError):
        raise InputError(setting, N_("{setting} must be an index, a slice or a list of indices of {count}, got {value}"),
                         count=t.size(dim), value=shown(value)) from None


def _positions(t: torch.Tensor, pos_slice: Any) -> torch.Tensor:
    """`t` `[..., T, C]` at the positions of `pos_slice` (tl_slice), as TransformerLens's Slice
    on the axis before the last."""
    return t if pos_slice is None else _sliced(t, -2, pos_slice, "pos_slice")


def _final_norm(model):
    """The LayerNorm (a LLaMA-family model's RMSNorm) before the LM head."""
    return model.model.norm if model.config.architecture == "llama" else model.ln_f


def through_final_norm(model, rows: torch.Tensor) -> torch.Tensor:
    """Vectors added to the residual stream `[..., C]` as the final norm passes them on to the LM
    head, its division by the stream's scale aside (one number per position, the same for every
    token's logit): a LayerNorm centres them over their C numbers and multiplies by its γ (its β
    is the same whatever is added), an RMSNorm multiplies by its γ. A direction written to the
    stream raises the logits of `lm_head(through_final_norm(model, rows))`, not of
    `lm_head(rows)`."""
    gain = _final_norm(model).weight.to(rows.dtype)
    if model.config.architecture == "llama":
        return rows * gain
    return (rows - rows.mean(dim=-1, keepdim=True)) * gain


def unembedding_rows(model, ids: torch.Tensor) -> torch.Tensor:
    """The LM head's rows of `ids` `[..., C]`: the token table's where the head is tied to it
    (GPT-2, in every number format), else the head's own weight."""
    if model.config.architecture == "llama":
        head = model.lm_head
        return head.wte.lookup(ids) if hasattr(head, "wte") else head.weight[ids]
    return model.wte.lookup(ids)


def attention_out_product(model, layer: int):
    """The product that mixes block `layer`'s heads back into the residual stream: GPT-2's c_proj
    (with its bias), a LLaMA-family model's o_proj (none)."""
    if model.config.architecture == "llama":
        return model.model.layers[layer].self_attn.o_proj
    return model.h[layer].attn.c_proj


def mlp_out_product(model, layer: int):
    """The product that writes block `layer`'s MLP into the stream: GPT-2's c_proj (with its
    bias), a LLaMA-family model's down_proj (none)."""
    if model.config.architecture == "llama":
        return model.model.layers[layer].mlp.down_proj
    return model.h[layer].mlp.c_proj


def output_bias(product, n_in: int, like: torch.Tensor) -> torch.Tensor:
    """What `product` adds to every input, its bias (zeros where it has none): `[C]`."""
    return product(like.new_zeros(1, n_in))[0]


def neuron_rows(model, layer: int, like: torch.Tensor) -> torch.Tensor:
    """Each neuron's row of block `layer`'s MLP output weight, `[d_mlp, C]`, as the product
    applies it: the weight itself where the product is a plain layer (GPT-2's Conv1D, `[in, out]`;
    a LLaMA-family model's Linear, `[out, in]`); in a number format whose kernel holds its own
    form of it (int8, packed float16), the product of each neuron alone, its bias taken off
    (d_mlp x d_mlp x C multiply-adds)."""
    product, d_mlp = mlp_out_product(model, layer), model.config.d_mlp
    if type(product) is Conv1D:
        return product.weight.to(like.dtype)
    if type(product) is Linear:
        return product.weight.t().to(like.dtype)
    alone = torch.eye(d_mlp, dtype=like.dtype, device=like.device)
    return product(alone) - output_bias(product, d_mlp, like)


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
