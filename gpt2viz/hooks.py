"""Named hook points: where the core hands its intermediate values to whoever listens.

The names are TransformerLens's classic ones (`blocks.3.attn.hook_pattern`), so a trace reads
without a glossary. Differences from TransformerLens, on purpose:

- per-head tensors (`hook_q`, `hook_k`, `hook_v`, `hook_z`, scores, pattern) are fired in the
  layout the computation uses, `[batch, head, position, head_dim]`; a subscriber made
  TransformerLens-style (`tl_style=True`, `LanguageModel.run_with_hooks`) is called as TL calls
  its hook functions, `fn(activation, hook)`, and gets `hook_q/k/v/z` (a LLaMA-family model's
  `hook_rot_q/k` too) in TL's layout `[batch, position, head, head_dim]` (a view: an in-place edit edits the pass), and
  `run_with_cache` keeps them in that layout;
- `hook_k` / `hook_v` carry the keys and values of the new positions only (before they join the
  KV cache), and `hook_attn_scores` / `hook_pattern` have one row per new position and one column
  per cached + new position;
- `kv_cache` fires with a `CacheState` (lengths and bytes, read-only) after every forward pass
  that used a cache, and `sample` with a `SampleEvent` after every choice of a next token.
- `ln*.hook_normalized` is `(x - mean) / scale`, before the LayerNorm's learned scale and bias, as
  TransformerLens 4's `TransformerBridge` fires it (some earlier versions fired the output after
  them); `ln*.hook_scale` is `sqrt(var + eps)`, `[batch, position, 1]`.

**Editing.** As in TransformerLens, a subscriber may return a tensor: it replaces the value at that
hook point for the rest of the pass (same shape, dtype and device, checked). `None` leaves the
value as it is. Several subscribers of one point each receive the value the previous one left.
No hook hands out storage shared with the weights or the KV cache, so an in-place write by a
subscriber changes this pass at most, never a later one. `kv_cache` and `sample` carry records,
not activations: what they return is ignored.

**Which pass.** While anyone listens, the core says at the start of each pass what it runs on:
`hooks.current_pass` is a `PassInfo` (`past`, the positions already in the KV cache; `real`, which
of the new positions are real tokens in a padded batch, or None when all are). An editing hook
that needs more than the value in hand (a mean over a prompt's real positions) reads it there.

**Whose passes.** `subscribe(...)` (a `with` block) and `run_with_cache` listen to the passes of
the thread that subscribed only, so passes run at the same time by other threads (a TUI worker, a
web server's requests) neither reach nor are edited by them. `add` / `remove` subscribe to every
thread's passes, until removed.

**Listening changes one path.** A block whose `hook_attn_scores` or `hook_pattern` has a
subscriber computes attention explicitly (scores, mask, softmax, then the weighted sum: the
tensors it hands out) instead of the fused kernel. Same maths, other rounding: the logits move by
up to ~2e-5, and both paths stay within tests/test_parity.py's 1e-4 of transformers.

With nobody subscribed a hook site costs one attribute check: `if hooks.active:`.
"""

from __future__ import annotations

import difflib
import fnmatch
import re
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from .errors import Gpt2VizError, InputError
from .i18n import N_, _
from .input_files import shown

__all__ = [
    "HookEditError", "HookFn", "HookNameError", "HookPoint", "Hooks", "PassInfo", "TLHookFn", "all_hook_names",
    "block_hook_names", "hook_name", "layer_of", "llama_hook_names", "tl_style",
]

HookFn = Callable[[str, Any], Any]  # returns None, or a tensor that replaces the value
TLHookFn = Callable[[Any, "HookPoint"], Any]  # TransformerLens's hook functions: fn(activation, hook)

# Hook names of one block; `block_hook_names(i)` gives the full names.
BLOCK_HOOKS = (
    "hook_resid_pre",
    "ln1.hook_scale",
    "ln1.hook_normalized",
    "attn.hook_q",
    "attn.hook_k",
    "attn.hook_v",
    "attn.hook_attn_scores",
    "attn.hook_pattern",
    "attn.hook_z",
    "hook_attn_out",
    "hook_resid_mid",
    "ln2.hook_scale",
    "ln2.hook_normalized",
    "mlp.hook_pre",
    "mlp.hook_post",
    "hook_mlp_out",
    "hook_resid_post",
)
# A LLaMA-family block's (gpt2viz/model/llama.py), as TransformerLens names them: the queries and
# keys again after their rotation, and the SwiGLU MLP's second input projection (`up`; `hook_pre`
# is the gate's, before SiLU).
LLAMA_BLOCK_HOOKS = (
    *BLOCK_HOOKS[: BLOCK_HOOKS.index("attn.hook_v") + 1],
    "attn.hook_rot_q",
    "attn.hook_rot_k",
    *BLOCK_HOOKS[BLOCK_HOOKS.index("attn.hook_attn_scores") : BLOCK_HOOKS.index("mlp.hook_pre") + 1],
    "mlp.hook_pre_linear",
    *BLOCK_HOOKS[BLOCK_HOOKS.index("mlp.hook_post") :],
)
EMBED_HOOKS = ("hook_embed", "hook_pos_embed")
FINAL_HOOKS = ("ln_final.hook_scale", "ln_final.hook_normalized", "unembed.hook_out")
STEP_HOOKS = ("kv_cache", "sample")
# Per-head hooks whose TransformerLens layout puts the position before the head.
TL_POSITION_FIRST = ("attn.hook_q", "attn.hook_k", "attn.hook_v", "attn.hook_z", "attn.hook_rot_q", "attn.hook_rot_k")


def hook_name(name: str, layer: int | None = None) -> str:
    """The full name of hook `name`: in block `layer` ('attn.hook_pattern', 3 gives
    'blocks.3.attn.hook_pattern'), or outside the blocks when `layer` is None ('hook_embed').
    The one place a hook name is put together, so a misspelt one fails loudly."""
    if layer is None:
        if name not in EMBED_HOOKS + FINAL_HOOKS + STEP_HOOKS:
            raise ValueError(f"no hook {name!r} outside the blocks")
        return name
    if name not in BLOCK_HOOKS and name not in LLAMA_BLOCK_HOOKS:
        raise ValueError(f"no hook {name!r} in a block")
    return f"blocks.{layer}.{name}"


def block_hook_names(layer: int) -> tuple[str, ...]:
    """Full hook names of block `layer`, in the order they fire."""
    return tuple(hook_name(name, layer) for name in BLOCK_HOOKS)


def all_hook_names(n_layer: int) -> list[str]:
    """Every hook name of an `n_layer` model, in forward order."""
    names = list(EMBED_HOOKS)
    for layer in range(n_layer):
        names.extend(block_hook_names(layer))
    return names + list(FINAL_HOOKS) + list(STEP_HOOKS)


def llama_hook_names(n_layer: int) -> list[str]:
    """Every hook name of an `n_layer` LLaMA-family model, in forward order (no position table:
    no `hook_pos_embed`)."""
    names = ["hook_embed"]
    for layer in range(n_layer):
        names.extend(hook_name(name, layer) for name in LLAMA_BLOCK_HOOKS)
    return names + list(FINAL_HOOKS) + list(STEP_HOOKS)


_LAYER_RE = re.compile(r"^blocks\.(\d+)\.")


def layer_of(name: str) -> int | None:
    """The block index in a hook name, or None for hooks outside the blocks."""
    match = _LAYER_RE.match(name)
    return int(match.group(1)) if match else None


class HookNameError(Gpt2VizError, KeyError):
    """A hook name or pattern that names no hook point of the model (a KeyError too, as a
    dictionary's unknown key is)."""

    def __init__(self, pattern: str, names: tuple[str, ...], message: str | None = None) -> None:
        if message is None:
            message = self._sentence(pattern, names)
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:  # KeyError's would quote the sentence
        return self.message

    @staticmethod
    def _sentence(pattern: str, names: tuple[str, ...]) -> str:
        if pattern.endswith("attn.hook_result"):
            return _("gpt2viz has no hook point {pattern!r}: each head's output into the stream is worked out by "
                     "ActivationCache.stack_head_results()").format(pattern=pattern)
        close = difflib.get_close_matches(pattern, names, n=3, cutoff=0.6)
        if close:
            return _("no hook point is named {pattern!r}; the closest: {names}").format(pattern=pattern, names=", ".join(close))
        return _("no hook point is named {pattern!r}; the model's go from {first} to {last} (all_hook_names)").format(
            pattern=pattern, first=names[0], last=names[-1])

    @classmethod
    def accepts_none(cls, function: str, names: tuple[str, ...]) -> HookNameError:
        """A filter function (TransformerLens's `lambda name: ...`) that accepts no hook name."""
        return cls(function, names, _("the filter {function} accepts none of the model's hook names (they go from "
                                      "{first} to {last}: all_hook_names)").format(
                                          function=function, first=names[0] if names else "?", last=names[-1] if names else "?"))

    @classmethod
    def never_cached(cls, name: str) -> HookNameError:
        """A step hook (STEP_HOOKS), which no pass of run_with_cache fires."""
        return cls(name, (), _("{name!r} is not in a cache of run_with_cache: it fires after a pass with a KV cache "
                               "(kv_cache) or a token chosen (sample), and that pass has neither").format(name=name))

    @classmethod
    def not_kept(cls, name: str, kept: int) -> HookNameError:
        """A hook point of the model that a cache did not keep (run_with_cache's names_filter)."""
        return cls(name, (), _("{name!r} is a hook point of the model, but not in this cache: its pass kept {count} "
                               "hook points (run_with_cache's names_filter)").format(name=name, count=kept))


class HookEditError(Gpt2VizError, ValueError):
    """A subscriber returned something that cannot stand in for the value at its hook point."""


def _check_replacement(name: str, value: Any, replacement: Any) -> None:
    def described(t: Any) -> str:
        return f"{list(t.shape)} {str(t.dtype).removeprefix('torch.')} on {t.device}"

    if not all(hasattr(replacement, attr) for attr in ("shape", "dtype", "device")):
        raise HookEditError(f"{name}: a subscriber returned a {type(replacement).__name__}, not a tensor")
    if (replacement.shape, replacement.dtype, replacement.device) != (value.shape, value.dtype, value.device):
        raise HookEditError(
            f"{name}: a subscriber returned {described(replacement)}; the hook carries {described(value)}"
        )


@dataclass(frozen=True)
class HookPoint:
    """What a TransformerLens-style hook function gets as its `hook` argument."""

    name: str

    def layer(self) -> int | None:
        """The block the hook point is in (None outside the blocks), as TL's `hook.layer()`."""
        return layer_of(self.name)


def tl_style(fn: TLHookFn) -> HookFn:
    """`fn(activation, hook)`, as TransformerLens calls a hook function, made a subscriber: the
    per-head values of TL_POSITION_FIRST reach it as `[batch, position, head, head_dim]` (a
    transposed view, no copy), and a tensor it returns in that layout is turned back. Where
    gradients are recorded, it gets a tensor of its own in that layout, which the pass goes on
    with: a gradient hook on it (`z.register_hook(...)`) then fires, as on TL's own tensor."""

    def call(name: str, value: Any) -> Any:
        turned = name.endswith(TL_POSITION_FIRST) and hasattr(value, "transpose")
        if not turned:
            return fn(value, HookPoint(name))
        given = value.transpose(1, 2)
        if getattr(value, "requires_grad", False) and _grad_enabled():
            given = given.contiguous()
            out = fn(given, HookPoint(name))
            out = given if out is None else out
            return out.transpose(1, 2) if hasattr(out, "transpose") else out  # else: fire says what is wrong
        out = fn(given, HookPoint(name))
        return out.transpose(1, 2) if hasattr(out, "transpose") else out

    return call


def tl_backward(fn: TLHookFn) -> HookFn:
    """`fn(gradient, hook)`, TransformerLens's backward hook, made a subscriber: at the forward
    pass it hooks the gradient of the activation (the copy `Hooks.fire` hands over where gradients
    are recorded, which the pass goes on with), and the backward pass calls it with that gradient,
    in TL's layout for TL_POSITION_FIRST; a tensor it returns replaces the gradient. In a pass
    without gradients there is nothing to hook (the methods that take backward hooks ask for
    grad=True)."""

    def call(name: str, value: Any) -> None:
        if not (getattr(value, "requires_grad", False) and _grad_enabled()):
            return None
        turned = name.endswith(TL_POSITION_FIRST)
        point = HookPoint(name)

        def on_gradient(grad: Any) -> Any:
            out = fn(grad.transpose(1, 2) if turned else grad, point)
            return out.transpose(1, 2) if turned and hasattr(out, "transpose") else out

        value.register_hook(on_gradient)
        return None

    return call


_tl = tl_style  # the methods' parameter of that name hides the function inside them


@dataclass(eq=False)  # identity, not value: the same fn may be subscribed twice to one pattern
class _Subscription:
    pattern: str
    fn: HookFn
    first: bool = False  # called before every other subscriber, the model's own included

    def __post_init__(self) -> None:
        # Compiled once: a new subscription makes every hook name be matched again.
        self._regex = re.compile(fnmatch.translate(self.pattern))

    def matches(self, name: str) -> bool:
        return self._regex.match(name) is not None



@dataclass(frozen=True)
class PassInfo:
    """What the pass now running in this thread runs on."""

    past: int = 0  # positions already in the KV cache before it
    real: Any = None  # [batch, new positions] bool tensor, True at a real token; None: all real


def fwd_pairs(fwd_hooks: object, setting: str = "fwd_hooks") -> list[tuple[Any, Callable]]:
    """TransformerLens's `fwd_hooks` (or `bwd_hooks`) as a list of `(names, fn)` pairs; anything
    else is an InputError naming `setting`."""
    pairs = list(fwd_hooks) if isinstance(fwd_hooks, (list, tuple)) else None
    if pairs is None or not all(isinstance(p, (list, tuple)) and len(p) == 2 and callable(p[1]) for p in pairs):
        raise InputError(setting, N_("{setting} must be a list of (hook name, function) pairs, got {value}"),
                         value=shown(fwd_hooks))
    return [(names, fn) for names, fn in pairs]


class Hooks:
    """The hook points of one model and their subscribers."""

    def __init__(self) -> None:
        self.active = False  # read on the hot path: True while anyone is subscribed, in any thread
        self._pass = threading.local()  # each thread's PassInfo (begin_pass)
        self.names: tuple[str, ...] = ()  # the model's hook points (bind); none known: nothing checked
        self.sizes: dict[str, int] = {}  # n_layer, n_head, d_mlp of the model (bind)
        self._subs: list[_Subscription] = []  # every thread's passes (add / remove)
        self._scoped: dict[int, list[_Subscription]] = {}  # thread id -> its own (subscribe)
        self._by_name: dict[tuple[int, str], tuple[HookFn, ...]] = {}
        self._lock = threading.Lock()  # subscriptions change from several threads
        self._tl_added: list[_Subscription] = []  # TransformerLens's add_hook's, until reset_hooks
        self._tl_permanent: list[_Subscription] = []  # add_hook(is_permanent=True)'s

    def bind(self, names: list[str] | tuple[str, ...], **sizes: int) -> None:
        """Tells the hooks their model's hook points and sizes: a subscription that matches none
        of the names is refused (HookNameError), and ablations are checked against the sizes."""
        self.names = tuple(names)
        self.sizes = dict(sizes)

    def _checked(self, subs: list[_Subscription]) -> list[_Subscription]:
        """`subs`, each matching some hook point of the model (HookNameError for one that does not)."""
        for sub in subs:
            if self.names and not any(sub.matches(name) for name in self.names):
                raise HookNameError(sub.pattern, self.names)
        return subs

    def add(self, pattern: str, fn: HookFn, *, tl_style: bool = False, backward: bool = False,
            prepend: bool = False) -> _Subscription:
        """Subscribes `fn(name, value)` to every hook whose name matches `pattern` (fnmatch), in
        the passes of every thread, until `remove`. `tl_style`: `fn(activation, hook)` with
        TransformerLens's layouts instead (the module's doc); `backward`: `fn(gradient, hook)`, a
        TL backward hook (`tl_backward`); `prepend`: called before the subscribers added earlier."""
        wrapped = tl_backward(fn) if backward else _tl(fn) if tl_style else fn
        (sub,) = self._checked([_Subscription(pattern, wrapped)])
        with self._lock:
            if prepend:
                self._subs.insert(0, sub)
            else:
                self._subs.append(sub)
            self._changed()
        return sub

    def matching(self, names: object, setting: str) -> list[str]:
        """A hook name or fnmatch pattern as it is; a function of the name (TransformerLens's
        filters) as the names it accepts, a HookNameError when it accepts none (a filter that
        matches nothing is a mistake, not an empty cache); `setting` names the argument."""
        if isinstance(names, str):
            return [names]
        if callable(names):
            chosen = [name for name in self.names if names(name)]
            if not chosen:
                raise HookNameError.accepts_none(getattr(names, "__name__", repr(names)), self.names)
            return chosen
        raise InputError(setting, N_("{setting} must be a hook name or pattern, a list of them, or a function, got {value}"),
                         value=shown(names))

    def add_tl(self, names: object, fn: Callable, *, backward: bool = False, permanent: bool = False,
               prepend: bool = False) -> None:
        """TransformerLens's `add_hook`: `fn(activation, hook)` (or, `backward`, `fn(gradient,
        hook)`) at the hook points `names` names (a name, a pattern or a filter function), in every
        thread's passes, until `reset_tl` (one `permanent` until `reset_tl(including_permanent=True)`);
        `prepend`: before the hooks added earlier."""
        for pattern in self.matching(names, "name"):
            sub = self.add(pattern, fn, tl_style=True, backward=backward, prepend=prepend)
            (self._tl_permanent if permanent else self._tl_added).append(sub)

    def reset_tl(self, including_permanent: bool = False) -> None:
        """Removes what `add_tl` added, the permanent ones too where asked (subscriptions made
        with `add` stay)."""
        while self._tl_added:
            self.remove(self._tl_added.pop())
        while including_permanent and self._tl_permanent:
            self.remove(self._tl_permanent.pop())

    @contextmanager
    def __call__(
        self, fwd_hooks: Any = (), bwd_hooks: Any = (), reset_hooks_end: bool = True, clear_contexts: bool = False
    ) -> Iterator[Hooks]:
        """TransformerLens's `model.hooks(...)`: `with lm.hooks(fwd_hooks=[(name, fn)]): ...` runs
        the block's passes, in every thread, with TL-style `fn(activation, hook)` at those hook
        points (a name, a pattern or a filter function each), and `bwd_hooks` `fn(gradient, hook)`
        on the gradients of the passes run with grad=True (`tl_backward`), removed at its end (kept
        until `reset_hooks` with `reset_hooks_end=False`; a backward hook already attached to a
        pass's activation fires at that pass's backward even after). `clear_contexts` is taken and
        does nothing (gpt2viz's hook points keep no context)."""
        added: list[_Subscription] = []
        try:  # every pair checked and added before the block runs, or none left behind
            for names, fn in fwd_pairs(fwd_hooks):
                added.extend(self.add(pattern, fn, tl_style=True) for pattern in self.matching(names, "fwd_hooks"))
            for names, fn in fwd_pairs(bwd_hooks, "bwd_hooks"):
                added.extend(self.add(pattern, fn, backward=True) for pattern in self.matching(names, "bwd_hooks"))
        except BaseException:
            for sub in added:
                self.remove(sub)
            raise
        try:
            yield self
        finally:
            for sub in added:
                if reset_hooks_end:
                    self.remove(sub)
                else:
                    self._tl_added.append(sub)

    def remove(self, sub: _Subscription) -> None:
        """Detaches a subscription made with `add`; removing twice is harmless."""
        with self._lock:
            if sub in self._subs:
                self._subs.remove(sub)
                self._changed()

    @contextmanager
    def subscribe(
        self, patterns: str | list[str] | tuple[str, ...], fn: HookFn, *, tl_style: bool = False, first: bool = False,
        backward: bool = False,
    ) -> Iterator[None]:
        """Subscribes `fn` to the passes this thread runs during a `with` block; it is detached
        even on error. `tl_style`: `fn(activation, hook)` with TransformerLens's layouts;
        `backward`: `fn(gradient, hook)`, a TL backward hook (`tl_backward`). `first`:
        `fn` is called before every other subscriber of those hooks, those of `add` included (a
        pass that stops there: `stop_at_layer`)."""
        if isinstance(patterns, str):
            patterns = [patterns]
        if backward:
            fn = tl_backward(fn)
        elif tl_style:
            fn = _tl(fn)
        subs = self._checked([_Subscription(p, fn, first) for p in patterns])
        thread = threading.get_ident()
        with self._lock:
            self._scoped.setdefault(thread, []).extend(subs)
            self._changed()
        try:
            yield
        finally:
            with self._lock:
                mine = self._scoped.get(thread, [])
                for sub in subs:
                    if sub in mine:
                        mine.remove(sub)
                if not mine:
                    self._scoped.pop(thread, None)
                self._changed()

    def new_sequence(self) -> None:
        """Called as a new text starts in this thread (`generate`, `run_with_cache`,
        `run_with_hooks`): what was kept from one text's prompt (a mean ablation's means) is not
        another's."""
        self._pass.sequence = self.sequence + 1

    @property
    def sequence(self) -> int:
        """How many texts this thread has started (new_sequence)."""
        return getattr(self._pass, "sequence", 0)

    def begin_pass(self, past: int, real: Any = None) -> None:
        """Called by the core as a pass starts (while anyone listens): see `current_pass`."""
        self._pass.info = PassInfo(past, real)

    @property
    def current_pass(self) -> PassInfo:
        """The pass this thread is running (a pass over new positions only, before any)."""
        return getattr(self._pass, "info", None) or PassInfo()

    def wants(self, name: str) -> bool:
        """Whether anyone listens at `name` in this thread's pass (lets the core skip work nobody
        will see)."""
        return bool(self._listeners(name))

    def fire(self, name: str, value: Any) -> Any:
        """Hands `value` to the subscribers of `name` and returns the value the pass goes on with:
        the last replacement a subscriber returned, else `value`. Callers check `active` first.

        Where gradients are being recorded, a tensor is handed over as a copy, which the pass then
        goes on with: TransformerLens's hooks edit activations in place (`z[:, :, 3] = 0`), and the
        pass's own tensor may be a view of another (q, k and v of c_attn's output) or one that
        autograd keeps for the backward pass (the attention pattern, z), where an edit in place
        breaks the backward pass. Without gradients, nothing is copied."""
        listeners = self._listeners(name)
        if listeners and getattr(value, "requires_grad", False) and _grad_enabled():
            value = value.clone()
        for fn in listeners:
            replacement = fn(name, value)
            if replacement is not None and name not in STEP_HOOKS:
                _check_replacement(name, value, replacement)
                value = replacement
        return value

    def _listeners(self, name: str) -> tuple[HookFn, ...]:
        key = (threading.get_ident(), name)
        found = self._by_name.get(key)
        if found is None:
            with self._lock:
                scoped = self._scoped.get(key[0], [])
                subs = [sub for sub in scoped if sub.first] + self._subs + [sub for sub in scoped if not sub.first]
                found = tuple(sub.fn for sub in subs if sub.matches(name))
                self._by_name[key] = found
        return found

    def _changed(self) -> None:  # under the lock
        self._by_name = {}  # a new dict: a reader holding the old one finishes with it
        self.active = bool(self._subs) or bool(self._scoped)


def _grad_enabled() -> bool:
    """Whether torch records gradients now (torch imported here only when a tensor that needs them
    reaches a hook: this module loads without it)."""
    import torch

    return torch.is_grad_enabled()
