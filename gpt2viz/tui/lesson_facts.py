"""The numbers a lesson page states, read from this run's trace (never typed into a lesson).

`lesson_facts(trace)` gives the page templates their placeholders, formatted as the stage view
formats the same numbers (so a page and the screen it points at say the same digits), and
`lesson_answers(trace)` the measured answers of the predict-then-measure pages, as numbers.
Both work on a replay: everything here is in the trace. `measured(result)` adds what the cost lab
timed on this machine (its LabResult: this session's, or a replayed trace's): a page whose answer
is among those waits for the measurement (`MEASURED` names them).
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass

from ..cpu_share import disturbed
from ..i18n import ngettext
from ..i18n.language import DEFAULT
from ..i18n.templates import placeholders, table
from ..text_safety import token_label
from ..trace import Trace
from .facts import RunFacts, cuts_reach, final_choice, hook_event, token_text
from .file_facts import FileFacts
from .formatting import count, nbytes, num, percent

MORE_TOKENS = 100  # "the KV cache after this many more tokens"
BATCH = 8  # "one decode step of this many sequences against one of a single sequence"
# The answers the cost lab measures (not in a trace of the forward pass), and the experiment
# (its tab) that measures each.
MEASURED = {"batch_step_ratio": "batch"}
TEMPERATURE = 0.5  # "the first candidate against the second at this temperature"
SHOWN_TOKENS = 8  # tokens of the prompt a page lists


# Worked out once per trace (a stage drawn again during a lesson reads them again).
_ANSWERS: weakref.WeakKeyDictionary[Trace, dict[str, float]] = weakref.WeakKeyDictionary()
_FACTS: weakref.WeakKeyDictionary[Trace, dict[str, str]] = weakref.WeakKeyDictionary()


def lesson_answers(trace: Trace) -> dict[str, float]:
    """The measured answers, by name: what a prediction's `answer` names."""
    if trace not in _ANSWERS:
        _ANSWERS[trace] = _answers(trace)
    return _ANSWERS[trace]


def lesson_facts(trace: Trace) -> dict[str, str]:
    """Every placeholder a lesson template may use, formatted for a sentence (numbers are written
    the same in every language here, so once per trace; a count with its noun, "1 token", "5
    tokens", in the language on show)."""
    if trace not in _FACTS:
        _FACTS[trace] = _facts(trace)
    T = len(trace.tokens)
    return {**_FACTS[trace], **_counted(T, T * T)}


def _counted(T: int, scores: int) -> dict[str, str]:
    """The prompt's counts with their nouns, singular or plural as the language has them."""
    return {
        "T_tokens": ngettext("{n} token", "{n} tokens", T).format(n=count(T)),
        "T_positions": ngettext("{n} position", "{n} positions", T).format(n=count(T)),
        "T_vectors": ngettext("{n} vector", "{n} vectors", T).format(n=count(T)),
        "T_token_ids": ngettext("{n} token id", "{n} token ids", T).format(n=count(T)),
        "T_pieces": ngettext("{n} piece", "{n} pieces", T).format(n=count(T)),
        "n_scores": ngettext("{n} score", "{n} scores", scores).format(n=count(scores)),
    }


def top_two(trace: Trace) -> tuple[tuple[str, float], tuple[str, float]] | None:
    """The last position's two most likely next tokens (shown safely) and their logits."""
    positions = hook_event(trace, "unembed.hook_out").get("positions") or []
    if not positions or len(positions[-1].get("logits") or []) < 2:
        return None
    last = positions[-1]
    return tuple((token_label(last["tokens"][i]), float(last["logits"][i])) for i in range(2))  # type: ignore[return-value]


def logit_gap(trace: Trace) -> float:
    """How far the first candidate's logit lies above the second's (nan with fewer than two)."""
    two = top_two(trace)
    return two[0][1] - two[1][1] if two is not None else float("nan")


def step_macs(f: RunFacts) -> int:
    """Multiply-adds of one new position through the weights' products (the config's
    `step_multiply_adds`; attention over the cache adds L x C x 2 more, small beside these)."""
    return f.config.step_multiply_adds


def _answers(trace: Trace) -> dict[str, float]:
    f = RunFacts.of(trace)
    _id, _text, prob = final_choice(trace)
    gap = logit_gap(trace)
    return {
        "wte_float32_bytes": 4 * f.params.wte,
        # c_attn on this pass: [T, C] times [C, 3C]
        "qkv_macs": f.T * f.n_embd * 3 * f.n_embd,
        # the LM head for the last position alone: [C] times [C, vocab]
        "head_macs": f.n_embd * f.vocab,
        # p(first) / p(second) = exp((logit1 - logit2) / temperature)
        "temperature_ratio": math.exp(gap / TEMPERATURE),
        "macs_per_byte": step_macs(f) / f.step_weight_bytes,
        "block_params": f.params.block,
        "n_params": f.n_params,
        # After MORE_TOKENS new tokens the cache holds all but the last (chosen, not yet run):
        # the generation view's count too (40 new tokens after a 5-token prompt: 44 positions).
        "kv_bytes_after_more": f.kv_bytes(f.L + MORE_TOKENS - 1),
        "kv_bytes_full": f.kv_bytes(f.n_ctx),
        # The positions after which the cache holds more than 1 MiB.
        "positions_for_mib": 2**20 // f.kv_bytes_per_position + 1,
        "next_prob_percent": 100 * prob if prob is not None else float("nan"),
        "logits": f.vocab * f.T,
        # The causal mask: one head's scores after a position, 0 + 1 + ... + (L - 1) of them.
        "masked_scores": f.L * (f.L - 1) // 2,
        # Writing MORE_TOKENS tokens without a cache: passes over L, L + 1, ..., L + MORE - 1 positions;
        # with one, the prompt once and then one position a step.
        "naive_positions": MORE_TOKENS * f.L + MORE_TOKENS * (MORE_TOKENS - 1) // 2,
        "cached_positions": f.L + MORE_TOKENS - 1,
        # The prompt as vectors: [1, T, C] numbers of the compute format.
        "embedded_bytes": f.T * f.n_embd * f.value_bytes,
        "mlp_share_percent": 100 * f.params.mlp / f.params.block,
        # The prompt's pass: every weight read once for T positions (the LM head scores them all).
        "prefill_macs_per_byte": f.T * step_macs(f) / f.step_weight_bytes,
        # The next token's nucleus at top-p 0.9 (trace/events.py sampling_reach; not in older traces).
        **({"nucleus_90": float(reach[0][0.9])} if (reach := cuts_reach(trace)) and 0.9 in reach[0] else {}),
    }


def _facts(trace: Trace) -> dict[str, str]:
    f = RunFacts.of(trace)
    p = f.params
    weights = FileFacts.of(trace).weights
    answers = lesson_answers(trace)
    _id, next_text, prob = final_choice(trace)
    two = top_two(trace)
    gap = logit_gap(trace)
    shown = [token_label(token_text(trace, i)) for i in range(min(f.T, SHOWN_TOKENS))]
    tokens = " · ".join(shown) + (" …" if f.T > SHOWN_TOKENS else "")
    return {
        "model": token_label(str(trace.model.get("name", "?"))),
        "dtype": f.dtype,
        "compute_dtype": f.compute_dtype,  # activations and the KV cache (int8 computes in float32)
        "n_layer": count(f.n_layer),
        "last_block": str(f.n_layer - 1),
        "n_head": count(f.n_head),
        "n_embd": count(f.n_embd),
        "head_dim": count(f.head_dim),
        "d_mlp": count(f.d_mlp),
        "vocab": count(f.vocab),
        "n_ctx": count(f.n_ctx),
        "n_params": count(f.n_params),
        "param_bytes": nbytes(f.param_bytes),  # the Model files stage says what more the model holds
        # As the safetensors file stores them ("?" for a trace from before gpt2viz kept its files' facts).
        "stored": "+".join(weights.dtypes) if weights is not None else "?",
        "file_bytes": nbytes(weights.data_bytes) if weights is not None and weights.data_bytes is not None else "?",
        "wte_params": count(p.wte),
        "wpe_params": count(p.wpe),
        "attention_params": count(p.attention),
        "mlp_params": count(p.mlp),
        "layer_norm_params": count(p.layer_norm),
        "block_params": count(p.block),
        "blocks_params": count(p.n_layer * p.block),
        "mlp_share": percent(p.mlp / p.block),
        "T": count(f.T),
        # A shape's sizes as the stages write shapes, without separators: [1, 5, 50257].
        "T_dim": str(f.T),
        "n_embd_dim": str(f.n_embd),
        "three_n_embd_dim": str(3 * f.n_embd),
        "vocab_dim": str(f.vocab),
        "tokens": tokens,
        # Tokens that are pieces of a character's UTF-8 bytes (shown \xe6\xb3): most Chinese characters.
        "byte_pieces": count(sum("\\x" in token_text(trace, i) for i in range(f.T))),
        "first_token": f"'{shown[0]}'" if shown else "",
        "scores": count(f.T * f.T),
        "logits": count(int(answers["logits"])),
        "next_token": f"'{next_text}'",  # final_choice gives it shown safely (token_label)
        "next_prob": percent(prob),
        "kv_per_position": nbytes(f.kv_bytes_per_position),
        "kv_now": nbytes(f.kv_bytes(f.L)),
        "more": count(MORE_TOKENS),
        "positions_after_more": count(f.L + MORE_TOKENS - 1),
        "kv_after_more": nbytes(int(answers["kv_bytes_after_more"])),
        "value_bytes": count(f.value_bytes),
        # 0 + 1 + … + (T − 1), every term where there are few ('0' for one token, '0 + 1' for two).
        "masked_sum": " + ".join(str(i) for i in range(f.T)) if f.T <= 4 else f"0 + 1 + … + {count(f.T - 1)}",
        "more_minus_1": count(MORE_TOKENS - 1),
        "masked_scores": count(int(answers["masked_scores"])),
        "kept_scores": count(f.T * f.T - int(answers["masked_scores"])),
        "naive_positions": count(int(answers["naive_positions"])),
        "cached_positions": count(int(answers["cached_positions"])),
        "cache_saving": num(answers["naive_positions"] / answers["cached_positions"], 3),
        "kv_full": nbytes(int(answers["kv_bytes_full"])),
        "positions_for_mib": count(2**20 // f.kv_bytes_per_position + 1),
        "batch_outweighs": count(-(-f.param_bytes // int(answers["kv_bytes_full"]))),
        "wte_float32_bytes": nbytes(int(answers["wte_float32_bytes"])),
        "three_n_embd": count(3 * f.n_embd),
        "qkv_macs": count(int(answers["qkv_macs"])),
        "head_macs": count(int(answers["head_macs"])),
        "first": f"'{two[0][0]}'" if two else "?",
        "second": f"'{two[1][0]}'" if two else "?",
        "logit_gap": num(gap, 3),
        "ratio_now": num(math.exp(gap), 3),
        "temperature": f"{TEMPERATURE:g}",
        "temperature_ratio": num(answers["temperature_ratio"], 3),
        "step_macs": count(step_macs(f)),
        "step_weight_bytes": nbytes(f.step_weight_bytes),
        "macs_per_byte": num(answers["macs_per_byte"]),  # as the verdict writes the answer: 0.425
        "bytes_per_mac": num(1 / answers["macs_per_byte"], 3),  # a weight's bytes, on average: 2.35
        "value_bytes_now": count(f.value_bytes),
        "batch": count(BATCH),
        "embedded_bytes": nbytes(int(answers["embedded_bytes"])),
        "prefill_macs": count(f.T * step_macs(f)),
        "prefill_macs_per_byte": num(answers["prefill_macs_per_byte"], 3),
        **_reach_facts(trace),
    }


@dataclass(frozen=True)
class Measured:
    """What the cost lab timed that a lesson asks about: answers and their placeholders, and the
    share of the CPUs other processes took meanwhile (None: not known)."""

    answers: dict[str, float]
    facts: dict[str, str]
    busy_share: float | None = None  # set when the machine was busy (cpu_share.disturbed)


def measured(result) -> Measured:
    """The answers MEASURED names, from a cost lab result (None or an experiment not run: none)."""
    sweep = getattr(result, "batch", None)
    rows = {row.batch: row for row in sweep.rows} if sweep is not None else {}
    if 1 not in rows or BATCH not in rows:
        return Measured({}, {})
    one, many = rows[1], rows[BATCH]
    ratio = many.step_ms / one.step_ms
    facts = {
        "batch_context": count(sweep.context),
        "batch1_ms": f"{num(one.step_ms, 3)} ms",
        "batch_ms": f"{num(many.step_ms, 3)} ms",
        "batch_step_ratio": num(ratio, 3),
        "batch_tokens_gain": num(BATCH / ratio, 3),
    }
    busy = sweep.others_cpu if disturbed(sweep) else None
    return Measured({"batch_step_ratio": ratio}, facts, busy)


def _reach_facts(trace: Trace) -> dict[str, str]:
    """The sampling cuts' reach, for the nucleus page ('?' for a trace from before it was kept)."""
    reach = cuts_reach(trace)
    nucleus, mass = reach if reach is not None else ({}, {})
    shown = {"nucleus_50": nucleus.get(0.5), "nucleus_90": nucleus.get(0.9), "nucleus_95": nucleus.get(0.95)}
    facts = {name: count(n) if n is not None else "?" for name, n in shown.items()}
    facts.update({f"top_k_{k}_mass": percent(mass[k]) if k in mass else "?" for k in (10, 50)})
    return facts


def page_text(key: str, facts: dict[str, str]) -> str:
    """The template of a page's text, or of its other form where it has one: `.unrecorded` when a
    number it quotes is not in this trace ('?': a trace written before gpt2viz kept it),
    `.byte_pieces` for a prompt cut into pieces of characters (a Chinese prompt: "the model never
    sees letters" explained nothing of the \\x pieces on screen)."""
    templates = table(DEFAULT)
    unknown = {name for name, value in facts.items() if value == "?"}
    if f"{key}.unrecorded" in templates and placeholders(templates[key]) & unknown:
        return f"{key}.unrecorded"
    if f"{key}.byte_pieces" in templates and facts.get("byte_pieces", "0") != "0":
        return f"{key}.byte_pieces"
    return key
