"""The facts of one run, read off its Trace: sizes, shapes, and the numbers several views quote.

No sentences live here (they are in narration.py and generation_narration.py) and nothing is
drawn (that is the widgets' job): these functions only look data up in a Trace, which the worker
has worked out completely before any screen reads it.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

from ..generate import SamplingSettings
from ..hooks import hook_name
from ..i18n import _
from ..kernels.choice import FLOAT16_HELD
from ..model.config import GPT2Config, ParamCounts
from ..model.llama import LlamaConfig
from ..text_safety import token_label
from ..trace import Trace
from ..trace.events import LOGIT_LENS
from .formatting import DTYPE_BYTES, quote
from .stages import Stage


@dataclass(frozen=True)
class StepChoice:
    """What a generation step chose, shown with that step's forward pass: the token (id, text as
    generated), its probability after the sampling settings, and those settings (None for a greedy
    step, whose choice is the pass's own argmax), written in the language on show when drawn
    (tui/generation.py's `decoding_label`)."""

    id: int
    text: str
    prob: float | None
    sampling: SamplingSettings | None = None


@dataclass(frozen=True)
class RunFacts:
    """The sizes of this run: the model's config, the prompt length, the number format."""

    config: GPT2Config | LlamaConfig  # the family's own (trace.model.architecture)
    T: int  # positions the recorded pass computed (1 for a decode step)
    past: int  # positions already in the KV cache before it (0 for a full pass)
    dtype: str  # the number format of the weights: float32, bfloat16, float16 or int8
    compute_dtype: str  # activations and the KV cache (int8 computes in float32)
    value_bytes: int  # bytes of one number in `compute_dtype`
    n_params: int  # counted from the loaded tensors
    weight_bytes: int  # what the weights take as stored (int8: with their scales)
    step_weight_bytes: int  # of which one decode step reads (LanguageModel.step_weight_bytes)
    float16_head: bool = False  # a float32 model's LM head multiplied by a float16 copy of the token table

    @classmethod
    def of(cls, trace: Trace) -> "RunFacts":
        """The facts of `trace`, worked out once per trace."""
        facts = _FACTS.get(trace)
        if facts is None:
            facts = _FACTS[trace] = cls._read(trace)
        return facts

    @classmethod
    def _read(cls, trace: Trace) -> "RunFacts":
        dtype = str(trace.model.get("dtype", "float32"))
        compute = str(trace.model.get("compute_dtype") or dtype)
        config = config_of(trace)
        n_params = int(trace.model.get("n_params") or config.n_params)
        value_bytes = DTYPE_BYTES.get(compute, 4)
        # Traces written before weight_bytes was recorded held every weight in `dtype`.
        weight_bytes = int(trace.model.get("weight_bytes") or n_params * value_bytes)
        products = (trace.model.get("kernels") or {}).get("products") or []
        return cls(
            config=config,
            T=len(trace.tokens),
            past=trace.past,
            dtype=dtype,
            compute_dtype=compute,
            value_bytes=value_bytes,
            n_params=n_params,
            weight_bytes=weight_bytes,
            # Traces written before 2026-12-02 did not say: all but the position table's other rows
            # (a format whose LM head had a copy of the token table read less than that).
            step_weight_bytes=int(
                trace.model.get("step_weight_bytes")
                or weight_bytes - (config.n_ctx - 1) * config.n_embd * value_bytes * (config.architecture == "gpt2")
            ),
            # Where its table holds float16 numbers only (kernels/choice.py; traces since 2026-12-06).
            float16_head=dtype == "float32" and any(p.get("kernel") == FLOAT16_HELD for p in products),
        )

    @property
    def param_bytes(self) -> int:
        """What the parameters themselves take in the weights' number format (4, 2 or 1 byte a
        number); the model may hold more (kernels' packed copies, int8's scales: `weight_bytes`)."""
        return self.n_params * (1 if self.dtype == "int8" else DTYPE_BYTES.get(self.dtype, 4))

    @property
    def L(self) -> int:
        """Every position the pass's queries see: the cached ones and the computed ones."""
        return self.past + self.T

    @property
    def llama(self) -> bool:
        """A LLaMA-family model: RMSNorm, rotary positions, grouped key/value heads, SwiGLU."""
        return self.config.architecture == "llama"

    @property
    def n_layer(self) -> int:
        return self.config.n_layer

    @property
    def n_kv_head(self) -> int:
        """Heads of keys and values (what the KV cache keeps): n_head in GPT-2, fewer in a grouped model."""
        return self.config.n_kv_head

    @property
    def n_head(self) -> int:
        return self.config.n_head

    @property
    def n_embd(self) -> int:
        return self.config.n_embd

    @property
    def head_dim(self) -> int:
        return self.config.head_dim

    @property
    def vocab(self) -> int:
        return self.config.vocab_size

    @property
    def n_ctx(self) -> int:
        return self.config.n_ctx

    @property
    def d_mlp(self) -> int:
        return self.config.d_mlp

    @property
    def eps(self) -> float:
        return self.config.norm_eps

    @property
    def activation(self) -> str:
        """The MLP's activation as the config names it (LLaMA's SwiGLU: silu)."""
        return "silu" if self.llama else self.config.activation_function

    @property
    def params(self) -> ParamCounts:
        """Where the parameters are, by part."""
        return self.config.param_counts

    @property
    def kv_bytes_per_position(self) -> int:
        """Bytes one more position adds to the KV cache, in this run's number format."""
        return self.config.kv_bytes_per_position(self.value_bytes)

    def kv_bytes(self, positions: int) -> int:
        """Bytes the KV cache holds for `positions` positions in this run's number format."""
        return positions * self.kv_bytes_per_position



_FACTS: "weakref.WeakKeyDictionary[Trace, RunFacts]" = weakref.WeakKeyDictionary()


def config_of(trace: Trace) -> GPT2Config | LlamaConfig:
    """The trace's config, of its model's family (traces written before 2026-12-05 are GPT-2's)."""
    family = LlamaConfig if trace.model.get("architecture") == "llama" else GPT2Config
    return family.from_saved(trace.model["config"])


# -- reading events ---------------------------------------------------------------------------


def hook_event(trace: Trace, name: str, layer: int | None = None) -> dict:
    """The event of hook `name` (in block `layer`), or {} when the trace has none."""
    return trace.event(hook_name(name, layer)) or {}


def cuts_reach(trace: Trace) -> tuple[dict[float, int], dict[int, float]] | None:
    """What the usual sampling cuts keep of the next token's distribution (trace/events.py
    `sampling_reach`): nucleus sizes by top_p, probability mass by top_k; None in a trace written
    before it was recorded."""
    reach = hook_event(trace, "unembed.hook_out").get("sampling")
    if not reach:
        return None
    return {e["p"]: e["tokens"] for e in reach["top_p"]}, {e["k"]: e["mass"] for e in reach["top_k"]}


def lens_event(trace: Trace) -> dict:
    """The logit-lens event, or {}."""
    return trace.event(LOGIT_LENS) or {}


def shape_of(trace: Trace, name: str, layer: int | None, fallback: list[int]) -> list[int]:
    """The recorded shape of hook `name`'s tensor, or `fallback` when it was not recorded."""
    return list(hook_event(trace, name, layer).get("shape") or fallback)


def token_text(trace: Trace, position: int) -> str:
    """The display text of the token at absolute `position`, cached or computed ('?' outside),
    safe to show (gpt2viz.text_safety.token_label: a replayed trace may hold any text)."""
    if 0 <= position < trace.past:
        return token_label(trace.context[position]["text"])
    index = position - trace.past
    return token_label(trace.tokens[index]["text"]) if 0 <= index < len(trace.tokens) else "?"


def key_texts(trace: Trace) -> list[str]:
    """The display text of every position a query can see: the cached ones, then the computed
    ones (safe to show, as `token_text`)."""
    return [token_label(t["text"]) for t in trace.context + trace.tokens]


def last_position(trace: Trace, f: RunFacts) -> dict:
    """The last computed position and its token (quoted), which the per-position sentences name."""
    position = f.past + f.T - 1
    return {"position": position, "token": quote(token_text(trace, position))}


def allocated_positions(kv: dict) -> int:
    """The positions a `kv_cache` event's buffers have room for now (the side panel's "reserved"):
    they grow in chunks up to the cache's capacity (0 where the event does not say)."""
    per_position = kv.get("bytes_per_position") or 0
    return (kv.get("allocated_bytes") or 0) // per_position if per_position else 0


def value_at(values: list | None, position: int):
    """`values[position]`, or None when the list is missing or too short."""
    if not values or not -len(values) <= position < len(values):
        return None
    return values[position]


# The hook whose event holds each LayerNorm stage's statistics, and the module's name.
LAYER_NORMS = {"ln1": ("ln1.hook_normalized", "ln_1"), "ln2": ("ln2.hook_normalized", "ln_2"), "ln_final": ("ln_final.hook_normalized", "ln_f")}


def layer_norm_event(trace: Trace, stage: Stage) -> dict:
    """The statistics of the LayerNorm that `stage` shows."""
    return hook_event(trace, LAYER_NORMS[stage.kind][0], stage.layer)


def layer_norm_name(stage: Stage) -> str:
    """'ln_1', 'ln_2' or 'ln_f'."""
    return LAYER_NORMS[stage.kind][1]


# -- attention --------------------------------------------------------------------------------

ATTENTION_HOOKS = {"scores": "attn.hook_attn_scores", "pattern": "attn.hook_pattern"}


def attention_event(trace: Trace, layer: int, which: str) -> dict:
    """The recorded scores ('scores') or pattern ('pattern') of block `layer`."""
    return hook_event(trace, ATTENTION_HOOKS[which], layer)


def last_row(trace: Trace, layer: int, head: int, which: str = "pattern") -> list[float | None]:
    """The last query's full row of a head's scores or pattern (kept whole even for long prompts)."""
    event = attention_event(trace, layer, which)
    if event.get("reduced"):
        rows = event.get("last_row") or []
        return list(rows[head]) if head < len(rows) else []
    heads = event.get("heads") or []
    return list(heads[head][-1]) if head < len(heads) and heads[head] else []


def masked_pattern(trace: Trace, layer: int, head: int) -> list[list[float | None]]:
    """A head's pattern with the masked (future) cells as None. The mask is read off the scores,
    where the trace writes masked cells as null: the picture shows the mask the model used. A
    trace without scores gets the causal mask of a whole map (a reduced one stays as it is)."""
    pattern = attention_event(trace, layer, "pattern")
    heads = pattern.get("heads") or []
    if head >= len(heads):
        return []
    scores = attention_event(trace, layer, "scores").get("heads") or []
    if head < len(scores):
        mask = scores[head]
        return [[None if mask[i][j] is None else v for j, v in enumerate(row)] for i, row in enumerate(heads[head])]
    if pattern.get("reduced"):
        return heads[head]
    rows = heads[head]
    past = (len(rows[0]) - len(rows)) if rows else 0  # cached positions before the first query
    return [[None if j > past + i else v for j, v in enumerate(row)] for i, row in enumerate(rows)]


def argmax(row: list[float | None]) -> int | None:
    """The index of the largest value in `row` (None entries skipped), or None."""
    best, best_j = None, None
    for j, v in enumerate(row):
        if v is not None and (best is None or v > best):
            best, best_j = v, j
    return best_j


def head_focus(trace: Trace, layer: int) -> list[tuple[int, float]]:
    """For each head: the position the last query attends to most, and its weight."""
    out = []
    for h in range(RunFacts.of(trace).n_head):
        row = last_row(trace, layer, h, "pattern")
        j = argmax(row)
        out.append((j if j is not None else 0, row[j] if j is not None else 0.0))
    return out


# -- the prediction ---------------------------------------------------------------------------


def untrained(token: dict) -> bool:
    """Whether a token a neuron raises (an MLP event's `promotes` entry) never occurred in the
    model's training text, as the trace marks it (the bundled model's tokens only)."""
    return token.get("trained") is False


def final_choice(trace: Trace) -> tuple[int | None, str, float | None]:
    """The predicted next token: id, display text (safe to show) and probability."""
    out = hook_event(trace, "unembed.hook_out").get("positions") or []
    if out:
        last = out[-1]
        return last["ids"][0], token_label(last["tokens"][0]), last["probs"][0]
    lens = lens_event(trace)
    return lens.get("final_id"), token_label(lens.get("final_token", "?")), None


def lens_earliest_top(trace: Trace) -> int | None:
    """The first block after which the final choice is the lens's top token, kept or not."""
    return next((entry["layer"] for entry in lens_event(trace).get("layers") or [] if entry.get("final_rank") == 1), None)


def lens_first_top(trace: Trace) -> int | None:
    """The first block after which the final choice is the lens's top token and stays there."""
    first = None
    for entry in lens_event(trace).get("layers") or []:
        if entry.get("final_rank") == 1:
            first = entry["layer"] if first is None else first
        else:
            first = None
    return first


# -- shapes -----------------------------------------------------------------------------------


def stage_shapes(trace: Trace, stage: Stage) -> list[tuple[str, list[int]]]:
    """The tensors this stage produces, as (name, shape), for the 'shapes so far' panel. Names are
    short and shared where the role is (every LayerNorm's output is ln(x), both residual updates
    are "update"), so that the list stays a list of shapes. The names are in the current language."""
    f = RunFacts.of(trace)
    T, C, H = f.T, f.n_embd, f.n_head
    i = stage.layer
    k = stage.kind
    if k == "tokenize":
        return [(_("token ids"), [1, T])]
    if k == "embed":
        return [("x", shape_of(trace, "hook_embed" if f.llama else "hook_pos_embed", None, [1, T, C]))]
    if k in LAYER_NORMS:
        return [("norm(x)" if f.llama else "ln(x)", list(layer_norm_event(trace, stage).get("shape") or [1, T, C]))]
    if k == "qkv" and f.llama:  # three products; keys and values in fewer heads than queries
        return [("q", shape_of(trace, "attn.hook_q", i, [1, H, T, f.head_dim])),
                ("k, v", shape_of(trace, "attn.hook_k", i, [1, f.n_kv_head, T, f.head_dim]))]
    if k == "qkv":
        return [(_("c_attn out"), [1, T, 3 * C]), ("q, k, v", shape_of(trace, "attn.hook_q", i, [1, H, T, f.head_dim]))]
    if k == "scores":
        return [("scores", shape_of(trace, "attn.hook_attn_scores", i, [1, H, T, T]))]
    if k in ("pattern", "heads"):
        return [
            ("pattern", shape_of(trace, "attn.hook_pattern", i, [1, H, T, T])),
            ("z", shape_of(trace, "attn.hook_z", i, [1, H, T, f.head_dim])),
        ]
    if k == "attn_out":
        return [(_("update"), shape_of(trace, "hook_attn_out", i, [1, T, C]))]
    if k == "mlp":
        return [(_("MLP hidden"), shape_of(trace, "mlp.hook_post", i, [1, T, f.d_mlp]))]
    if k == "mlp_out":
        return [(_("update"), shape_of(trace, "hook_mlp_out", i, [1, T, C]))]
    if k == "lm_head":
        logits = shape_of(trace, "unembed.hook_out", None, [1, T, f.vocab])
        return [("logits", logits), (_("last row's logits"), [1, logits[-1]])]
    if k == "logit_lens":
        return [("logit lens", list(lens_event(trace).get("shape") or [f.n_layer, f.vocab]))]
    if k == "next_token":
        return [(_("ids + next"), [1, f.L + 1])]
    return []
