"""The Recorder: listens at every hook point and keeps one plain-data event per stage.

A Trace is what the TUI shows and what `--json` writes; both read the same events, so a person
and a script always see the same numbers.
"""

from __future__ import annotations

import time
from typing import Callable

import torch

from ..errors import InputError, SettingError
from ..generate import STOP_CANCELLED, STOP_CONTEXT, SamplingSettings, SampleEvent, generate
from ..hooks import layer_of
from ..i18n import N_, count
from ..interventions import Ablation, applied
from ..activation_cache import through_final_norm
from ..kernels.cpu import this_cpu
from ..language_model import LanguageModel
from ..model.weights import FLOAT_DTYPES
from . import events as ev
from .document import MAX_GENERATION_TOPK, Trace
from .notices import notice

EMBED_PREVIEW_DIMS = 32


class Recorder:
    """A hook subscriber that turns one forward pass into a list of events."""

    def __init__(self, lm: LanguageModel, topk: int = 10, past: int = 0) -> None:
        self.lm = lm
        self.topk = topk
        self.past = past  # positions in the KV cache before the recorded pass
        self._display = lm.tokenizer.display
        self.events: list[dict] = []
        self._to_round: list[tuple[dict, str]] = []  # event fields still holding a tensor
        self._residual: torch.Tensor | None = None  # input of the next LayerNorm
        self._embed: torch.Tensor | None = None
        self._block_norms: dict[str, torch.Tensor] = {}  # this block's norms so far, for hook_resid_post
        self._lens_inputs: list[torch.Tensor] = []  # last position of each block's output
        self._mlp_pre: torch.Tensor | None = None  # this block's MLP before GELU (LLaMA: its gate)
        self._llama = lm.config.architecture == "llama"
        self._unrotated: dict[str, torch.Tensor] = {}  # LLaMA: head 0's last query and key before rotation

    def __call__(self, name: str, value) -> None:
        event = {"stage": name, "layer": layer_of(name)}
        if isinstance(value, torch.Tensor):
            event["shape"] = list(value.shape)
        # Handlers are named after the last part of the hook name: `ln1.hook_scale` -> _on_hook_scale.
        handler = getattr(self, "_on_" + name[name.rfind(".") + 1 :], None)
        if handler is not None:
            fields = handler(name, value) or {}
            # Small tensors (statistics per position) are rounded after the pass, all at once.
            self._to_round.extend((event, key) for key, v in fields.items() if isinstance(v, torch.Tensor))
            event.update(fields)
        self.events.append(event)

    def finish(self, final_logits: torch.Tensor) -> list[dict]:
        """The events, complete: statistics rounded, and the logit lens added."""
        rounded = ev.round_tensors([event[key] for event, key in self._to_round])
        for (event, key), value in zip(self._to_round, rounded):
            event[key] = value
        self._to_round = []
        self.events.append(self.logit_lens_event(final_logits))
        return self.events

    # -- embeddings -------------------------------------------------------------------------
    def _on_hook_embed(self, name, tok):
        self._embed = tok
        return {"norms": ev.norms(tok), "preview": tok[0, :, :EMBED_PREVIEW_DIMS]}

    def _on_hook_pos_embed(self, name, pos):
        total = self._embed + pos
        return {
            "norms": ev.norms(pos),
            "sum_norms": ev.norms(total),
            "preview": pos[0, :, :EMBED_PREVIEW_DIMS],
            "sum_preview": total[0, :, :EMBED_PREVIEW_DIMS],
        }

    # -- the residual stream ----------------------------------------------------------------
    def _on_hook_resid_pre(self, name, x):
        self._residual = x
        self._block_norms = {"before_norms": ev.norms(x)}
        return {"norms": self._block_norms["before_norms"]}

    def _on_hook_attn_out(self, name, update):
        self._block_norms["attn_update_norms"] = ev.norms(update)
        return {"norms": self._block_norms["attn_update_norms"]}

    def _on_hook_resid_mid(self, name, x):
        self._residual = x
        return {"norms": ev.norms(x)}

    def _on_hook_mlp_out(self, name, update):
        self._block_norms["mlp_update_norms"] = ev.norms(update)
        return {"norms": self._block_norms["mlp_update_norms"]}

    def _on_hook_resid_post(self, name, x):
        self._residual = x
        self._lens_inputs.append(x[0, -1])
        # The block's whole story in one event: norms in, the two updates, and out.
        return {"norms": ev.norms(x), **self._block_norms}

    # -- LayerNorms -------------------------------------------------------------------------
    def _on_hook_scale(self, name, scale):
        return {"scale": scale[0, :, 0]}

    def _on_hook_normalized(self, name, normalized):
        # The hook carries the norm before its learned scale (and GPT-2's bias); the stage shows
        # what comes out after them too, worked out the same way the layer does.
        norm = self._norm(name)
        out = normalized * norm.weight
        if getattr(norm, "bias", None) is not None:
            out = out + norm.bias
        eps = self.lm.config.norm_eps
        # The last position's values, counted in bins once the trace is read (copies of one row each).
        rows = (self._residual[0, -1].clone(), normalized[0, -1].clone(), out[0, -1].clone())
        position = self._last_position(normalized)
        stats, histogram = (
            (ev.rms_norm_stats, ev.rms_norm_histogram) if self._llama else (ev.layer_norm_stats, ev.layer_norm_histogram)
        )
        return {
            **stats(self._residual, out, eps),
            "histogram": ev.Later(lambda: histogram(*rows, eps, position)),
        }

    def _last_position(self, t: torch.Tensor) -> int:
        """The absolute position of the last of `t`'s `[1, T, ...]` positions."""
        return self.past + t.size(1) - 1

    def _norm(self, name: str):
        """The norm whose hook is `name` ('blocks.3.ln2.hook_normalized', 'ln_final...'): GPT-2's
        LayerNorms, or LLaMA's RMSNorms."""
        model, layer = self.lm.model, layer_of(name)
        if self._llama:
            if layer is None:
                return model.model.norm
            block = model.model.layers[layer]
            return block.input_layernorm if ".ln1." in name else block.post_attention_layernorm
        if layer is None:
            return model.ln_f
        return model.h[layer].ln_1 if ".ln1." in name else model.h[layer].ln_2

    def _mlp_out_product(self, layer: int):
        """The MLP's last product, from its hidden numbers back to the residual stream: GPT-2's
        c_proj, LLaMA's down_proj."""
        if self._llama:
            return self.lm.model.model.layers[layer].mlp.down_proj
        return self.lm.model.h[layer].mlp.c_proj

    # -- attention ------------------------------------------------------------------------
    def _on_hook_attn_scores(self, name, scores):
        return ev.attention_maps(scores, masked_as_none=True)

    def _on_hook_pattern(self, name, pattern):
        last = pattern[0, :, -1].clone()  # the last query's weights per head: (nh, L)
        position = pattern.size(-1) - 1
        return {
            **ev.attention_maps(pattern, masked_as_none=False),
            "entropy": ev.Later(lambda: ev.attention_entropy_bits(last, position)),
        }

    # -- rotary positions (LLaMA) ---------------------------------------------------------------
    def _on_hook_q(self, name, q):
        if self._llama:  # head 0 at the last position, (hd,): what the rotation turns (GPT-2 has none)
            self._unrotated["q"] = q[0, 0, -1].clone()

    def _on_hook_k(self, name, k):
        if self._llama:
            self._unrotated["k"] = k[0, 0, -1].clone()

    def _on_hook_rot_q(self, name, q):
        return self._rotation("q", q)

    def _on_hook_rot_k(self, name, k):
        return self._rotation("k", k)

    def _rotation(self, which: str, rotated: torch.Tensor) -> dict:
        before, after = self._unrotated.pop(which), rotated[0, 0, -1].clone()
        position, theta = self._last_position(rotated.transpose(1, 2)), self.lm.config.rope_theta
        return {"rotation": ev.Later(lambda: ev.rotary_pairs(before, after, position, theta))}

    # -- MLP --------------------------------------------------------------------------------
    def _on_hook_pre(self, name, pre):
        self._mlp_pre = pre
        last, position = pre[0, -1].clone(), self._last_position(pre)
        return {"histogram": ev.Later(lambda: ev.pre_activation_histogram(last, position))}

    def _on_hook_post(self, name, post):
        model = self.lm.model
        c_proj = self._mlp_out_product(layer_of(name))

        @torch.inference_mode()
        def writes(indices: list[int]) -> torch.Tensor:
            # Neuron n's value vector is its row of c_proj's weight (LLaMA: down_proj's): the
            # product of a one-hot input, less the bias (so any number format's product works),
            # read through the final norm's γ (a LayerNorm's centring too) and the LM head.
            one_hot = torch.zeros(len(indices), post.size(-1), dtype=post.dtype, device=post.device)
            one_hot[range(len(indices)), indices] = 1
            rows = c_proj(one_hot) - c_proj(torch.zeros_like(one_hot[:1]))
            return model.lm_head(through_final_norm(model, rows))

        # SwiGLU's neurons may write as much below 0 as above: the strongest by size (LLaMA).
        return ev.mlp_activity(post, self._mlp_pre, writes, self._display, self.lm.training_tokens, by_magnitude=self._llama)

    # -- output -----------------------------------------------------------------------------
    def _on_hook_out(self, name, logits):
        # The closures hold what they need, not the Recorder: no reference cycles to collect.
        topk, display = self.topk, self._display
        event = {"positions": ev.Later(lambda: ev.top_tokens_rows(logits[0], topk, display))}
        if bool(torch.isfinite(logits[0, -1]).all()):  # no distribution to cut from NaN scores
            event["sampling"] = ev.Later(lambda: ev.sampling_reach(logits[0, -1]))  # the next token's
        return event

    def _on_kv_cache(self, name, cache):
        return ev.kv_cache_summary(cache)

    def logit_lens_event(self, final_logits: torch.Tensor) -> dict:
        """The last position's prediction read off after every block, through ln_f and the LM head."""
        final_id = int(torch.argmax(final_logits))
        resid = torch.stack(self._lens_inputs)  # every block's last-position output, (n_layer, C)
        lm, topk = self.lm, self.topk
        return {
            "stage": ev.LOGIT_LENS,
            "layer": None,
            "shape": [len(self._lens_inputs), lm.config.vocab_size],
            "final_id": final_id,
            "final_token": self._display(final_id),
            # Another pass over wte (154 MB for GPT-2 small): worth it only when someone looks.
            "layers": ev.Later(lambda: logit_lens(lm, resid, final_id, topk)),
        }


def logit_lens(lm: LanguageModel, resid: torch.Tensor, final_id: int, topk: int = 10) -> list[dict]:
    """Each row of `resid` (a block's output at the last position) read as a prediction: ln_f,
    then the LM head. Per block: its top tokens, and the rank and probability of `final_id`."""
    all_logits = lm.model.logits_from_residual(resid)  # one product for every block: (n_layer, vocab)
    rows = ev.top_tokens_rows(all_logits, topk, lm.tokenizer.display, final_id=final_id)
    return [{"layer": layer, **row} for layer, row in enumerate(rows)]


def prepare_prompt(lm: LanguageModel, prompt: str | list[int]) -> tuple[list[int], list[dict]]:
    """The prompt's ids, with notices: an empty prompt starts from <|endoftext|>, a prompt longer
    than the context keeps its last n_ctx tokens."""
    ids = lm.encode_prompt(prompt)
    notices = []
    eos = lm.eos_id
    if not ids:
        ids = [eos]
        notices.append(notice("prompt_empty", eos_id=eos))
    n_ctx = lm.config.n_ctx
    if len(ids) > n_ctx:
        notices.append(notice("prompt_cut", tokens=len(ids), n_ctx=n_ctx))
        ids = ids[-n_ctx:]
    return ids, notices


def token_table(lm: LanguageModel, ids: list[int]) -> list[dict]:
    """Position, id, display text and byte length of each token."""
    tok = lm.tokenizer
    return [
        {"position": i, "id": t, "text": tok.display(t), "bytes": len(tok.token_bytes(t))}
        for i, t in enumerate(ids)
    ]


# A recorded pass keeps two maps (scores and pattern) of each of n_layer x n_head heads, of
# `map_numbers` numbers each, and while it runs holds one block's maps whole, [n_head, T, L]. Both
# grow with the config's sizes, not the checkpoint's bytes (a 13 MB checkpoint may have 64 blocks
# of 64 heads), so a pass beyond these bounds is refused before it runs. GPT-2 xl over its whole
# context (48 x 25 heads, 1,024 positions) keeps 12,288,000 numbers and holds 26 million cells; a
# model at the config's limits (64 x 64 heads) over 45 positions keeps 16.6 million, measured: a
# 127 MB trace, 1.1 GB of memory while it is written (46 positions would be over the bound).
MAX_ATTENTION_NUMBERS = 2**24
MAX_LIVE_MAP_CELLS = 2**26  # 256 MiB of float32


def map_numbers(T: int, L: int) -> int:
    """How many numbers `ev.attention_maps` keeps of one head's `[T, L]` map: all of them, or the
    averaged grid and the last row."""
    if T <= ev.FULL_ATTENTION_MAX:
        return T * L
    return min(T, ev.DOWNSAMPLED_SIZE) * min(L, ev.DOWNSAMPLED_SIZE) + L


def _recordable(config, T: int, L: int) -> bool:
    """Whether a pass of `T` new positions over `L` in all stays within both bounds."""
    heads = config.n_layer * config.n_head
    return 2 * heads * map_numbers(T, L) <= MAX_ATTENTION_NUMBERS and config.n_head * T * L <= MAX_LIVE_MAP_CELLS


def check_recordable(config, T: int, past: int = 0) -> None:
    """Refuses (InputError) a recorded pass over `T` new positions after `past` cached ones whose
    attention maps would pass the bounds above, saying how many positions such a pass may have."""
    if _recordable(config, T, past + T):
        return
    # The most positions in all that a pass of the same kind may reach (a full pass: T = L; a
    # decode step: T new ones). At the config's limits a full pass may have 45, so "positions" is
    # always plural.
    if past:
        longest = max((n for n in range(T, past + T) if _recordable(config, T, n)), default=0)
    else:
        longest = max((n for n in range(1, T) if _recordable(config, n, n)), default=0)
    raise InputError(
        "input_ids",
        N_("a recorded pass over {positions} positions would make larger attention maps than gpt2viz records "
           "(n_layer {n_layer} × n_head {n_head} heads); this model records at most {max} positions"),
        positions=count(past + T), n_layer=config.n_layer, n_head=config.n_head, max=count(longest),
    )


def record_forward(
    lm: LanguageModel, ids: list[int], use_cache: bool = True, topk: int = 10, past: int = 0, reserve: int | None = None
) -> tuple[list[dict], float]:
    """One forward pass over `ids` with every hook recorded; returns the events and its ms.

    With `past`, the first `past` ids go into the KV cache first, unrecorded, and the pass that is
    recorded is the one over the rest: with one id left, a decode step as generation runs it
    (one query row against the cached keys and values). Its numbers equal those of the step
    generation ran up to float rounding: here one prefill wrote the earlier keys and values,
    where generation wrote them a step at a time, and attention kernels sum in another order.
    `reserve`: the positions the cache allocates at once (a generation's step: what the generation
    reserved, so the pass's cache is the size the generation's was; default: kv_cache.py's)."""
    if past and not use_cache:
        raise ValueError("a pass after cached positions needs the cache")
    check_recordable(lm.config, len(ids) - past, past)
    recorder = Recorder(lm, topk, past)
    cache = lm.model.new_cache(reserve=reserve) if use_cache else None
    if past:
        lm.model(torch.tensor([ids[:past]], device=lm.model.device), cache, last_only=True)
    start = time.perf_counter()
    with lm.hooks.subscribe("*", recorder):
        logits, _ = lm.model(torch.tensor([ids[past:]], device=lm.model.device), cache)
    events = recorder.finish(logits[0, -1])
    return events, (time.perf_counter() - start) * 1000


def trace_decode_step(
    lm: LanguageModel, ids: list[int], *, topk: int = 10, quality: bool = False, reserve: int | None = None
) -> Trace:
    """The forward pass of the decode step that reads the last of `ids` with the others cached:
    `tokens` holds that one position, `context` the cached ones. `reserve`: as record_forward's."""
    if len(ids) < 2:
        raise ValueError("a decode step needs at least one cached position before it")
    past = len(ids) - 1
    events, forward_ms = record_forward(lm, ids, topk=topk, past=past, reserve=reserve)
    table = token_table(lm, ids)
    return Trace(
        model=model_info(lm),
        prompt=lm.tokenizer.decode(ids),
        tokens=table[past:],
        context=table[:past],
        events=events,
        notices=list(lm.notices),
        timings={"forward_ms": ev.rnd(forward_ms)},
        quality=_measure_quality(lm, ids) if quality else None,
        model_files=files_info(lm),
    )


def _measure_quality(lm: LanguageModel, ids: list[int], ablations=()) -> dict | None:
    """`lm` against float32 on the same checkpoint over `ids` (None for a float32 model), both
    with the same parts switched off."""
    if lm.precision == "float32":
        return None
    from ..quality import compare_logits

    twin = lm.float32_twin()
    with applied(twin.hooks, ablations):
        agreement = compare_logits(lm, twin, ids).to_dict()
    return {"reference": "float32", **{k: v if isinstance(v, int) else ev.rnd(v) for k, v in agreement.items()}}


class GenerationRecorder:
    """Listens to `sample` and `kv_cache` while generating and keeps one plain record per step."""

    def __init__(self, lm: LanguageModel, topk: int = 10) -> None:
        self.lm = lm
        self.topk = topk
        self.steps: list[dict] = []
        self._cache: dict | None = None

    def __call__(self, name: str, value) -> None:
        if name == "kv_cache":
            self._cache = ev.kv_cache_summary(value)
        elif name == "sample":
            self.steps.append(self._step(value))

    def _step(self, sample: SampleEvent) -> dict:
        display = self.lm.tokenizer.display
        # Greedy steps sample from the plain softmax already: no need to compute it again.
        raw = sample.probs if sample.settings.greedy else torch.softmax(ev.float64(sample.logits), dim=-1)
        step = {
            "step": sample.step,
            "id": sample.token_id,
            "text": display(sample.token_id),
            "ms": None,
            "used_cache": sample.used_cache,
            "raw": ev.top_of_distribution(raw, self.topk, display),
            "candidates": ev.top_of_distribution(sample.probs, self.topk, display),
            "chosen_prob": ev.rnd(float(sample.probs[sample.token_id])),
            "kv_cache": self._cache,
        }
        self._cache = None
        return step


def check_generation_size(room: int, max_new_tokens: int, topk: int) -> None:
    """Refuses (SettingError on max_new_tokens) a generation whose steps would record more top-k
    entries than a trace keeps: the steps it can make (`room` positions left in the context) times
    `topk`."""
    steps = max(0, min(max_new_tokens, room))
    if steps * topk > MAX_GENERATION_TOPK:
        raise SettingError(
            "max_new_tokens",
            N_("{setting} {value} would record {topk} candidates at each of {steps} steps, more than a trace "
               "keeps ({max} in all): ask for at most {most} tokens, or fewer candidates"),
            value=count(max_new_tokens), topk=count(topk), steps=count(steps), max=count(MAX_GENERATION_TOPK),
            most=count(MAX_GENERATION_TOPK // topk),
        )


def record_generation(
    lm: LanguageModel,
    prompt_ids: list[int],
    max_new_tokens: int,
    settings: SamplingSettings,
    use_cache: bool = True,
    topk: int = 10,
    on_step: Callable[[dict], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    generator: torch.Generator | None = None,
) -> dict:
    """Generates and returns the `generation` part of a trace; `on_step` gets each step's record.
    `generator` carries sampling on from an earlier call (see `gpt2viz.generate.generate`)."""
    from ..costs import stream_bandwidth
    from ..cpu_share import cpu_ticks, share_since

    check_generation_size(lm.config.n_ctx - len(prompt_ids), max_new_tokens, topk)
    recorder = GenerationRecorder(lm, topk)
    started = cpu_ticks()
    stream_gb_s = stream_bandwidth().value if lm.model.device.type == "cpu" else None  # kept, unless measured busy

    def step_done(info) -> None:
        step = recorder.steps[-1]
        step["ms"] = ev.rnd(info.ms)
        step["context_length"] = info.context_length
        if on_step is not None:
            on_step(step)

    with lm.hooks.subscribe(["sample", "kv_cache"], recorder):
        result = generate(
            lm.model,
            prompt_ids,
            max_new_tokens,
            use_cache=use_cache,
            settings=settings,
            eos_id=lm.stop_id,
            on_step=step_done,
            should_stop=should_stop,
            generator=generator,
        )
    return {
        "cache": use_cache,
        "settings": _settings_record(settings),
        "max_new_tokens": max_new_tokens,
        "topk": topk,
        "ids": list(result.token_ids),
        "text": lm.tokenizer.decode(result.token_ids),
        "stop_reason": result.stop_reason,
        "cancelled": result.stop_reason == STOP_CANCELLED,
        "steps": recorder.steps,
        "ttft_ms": _ms(result.ttft_ms),
        "mean_decode_ms": _ms(result.mean_decode_ms),
        "tokens_per_s": _ms(result.tokens_per_s),
        # What this machine streams a large weight matrix at: what the step times compare with.
        "stream_gb_s": None if stream_gb_s is None else ev.rnd(stream_gb_s),
        # The share of the CPUs other processes used meanwhile: above cpu_share.BUSY_SHARE the
        # step times are theirs as much as the model's.
        "others_cpu": share_since(started),
    }


def record_batch(
    lm: LanguageModel, prompt_ids: list[int], batch_size: int, max_new_tokens: int, settings: SamplingSettings
) -> dict:
    """Generates `batch_size` continuations of the prompt together and returns the trace's
    `batch` part: every row's ids and text, and the time of each batched step."""
    from ..batch import generate_batch

    result = generate_batch(lm.model, prompt_ids, batch_size, max_new_tokens, settings=settings, eos_id=lm.stop_id)
    return _batch_record(lm, result, settings, max_new_tokens)


def record_prompts(
    lm: LanguageModel, prompts: list[list[int]], max_new_tokens: int, settings: SamplingSettings
) -> dict:
    """Continues several prompts (ids, any lengths) together, padded on the left with an
    attention mask, and returns the trace's `batch` part; each row also records its prompt."""
    from ..batch import generate_prompts

    result = generate_prompts(lm.model, prompts, max_new_tokens, settings=settings, eos_id=lm.stop_id)
    record = _batch_record(lm, result, settings, max_new_tokens)
    for row, prompt in zip(record["rows"], prompts):
        row["prompt_ids"] = list(prompt)
        row["prompt"] = lm.tokenizer.decode(prompt)
    return record


def _batch_record(lm: LanguageModel, result, settings: SamplingSettings, max_new_tokens: int) -> dict:
    return {
        "size": result.batch_size,
        "settings": _settings_record(settings),
        "max_new_tokens": max_new_tokens,
        "rows": [
            {"row": b, "seed": seed, "ids": list(row.token_ids), "text": lm.tokenizer.decode(row.token_ids), "stop_reason": row.stop_reason}
            for b, (row, seed) in enumerate(zip(result.rows, result.seeds))
        ],
        "step_ms": [ev.rnd(ms) for ms in result.step_ms],
        "ttft_ms": _ms(result.ttft_ms),
        "mean_decode_ms": _ms(result.mean_decode_ms),
        "tokens_per_s": _ms(result.tokens_per_s),
    }


def _settings_record(settings: SamplingSettings) -> dict:
    return {
        "temperature": settings.temperature,
        "top_k": settings.top_k,
        "top_p": settings.top_p,
        "seed": settings.seed,
        "greedy": settings.greedy,
    }


def _ms(value: float | None) -> float | None:
    return None if value is None else ev.rnd(value)


def stored_formats(names: str) -> str:
    """The number formats a checkpoint's files hold, safetensors' names ('BF16+F32') in dtype's
    ('bfloat16+float32'); a GGUF file's block formats keep GGUF's names ('F32+Q4_1+Q8_0')."""
    if any(name not in FLOAT_DTYPES for name in names.split("+")):
        return names
    return "+".join(sorted(str(FLOAT_DTYPES[name]).removeprefix("torch.") for name in names.split("+")))


def model_info(lm: LanguageModel) -> dict:
    """What a trace says about the model it came from."""
    return {
        "name": lm.name,
        "architecture": lm.config.architecture,  # gpt2 or llama: which core, which stages
        "source": {"kind": lm.source.kind, "path": str(lm.source.path)},
        "config": lm.config.to_dict(),
        "n_params": lm.n_params,
        "dtype": lm.precision,  # the number format of the weights (int8 computes in float32)
        "compute_dtype": str(lm.model.dtype).removeprefix("torch."),
        "weight_bytes": lm.weight_bytes,
        "step_weight_bytes": lm.step_weight_bytes,
        "file_bytes": lm.file_bytes,  # the weights' files as stored (a GGUF file: the whole file)
        "stored_dtype": stored_formats(lm.stored_dtype),
        "device": str(lm.model.device),
        # How this machine multiplies by the weights (gpt2viz.kernels): float32 products, and the
        # other formats' (kernels/formats.py).
        "kernels": {
            "cpu": this_cpu().describe(), "products": [c.to_dict() for c in lm.kernels],
            "batch_packed": getattr(lm.model.lm_head, "batch_product", None) is not None,  # kernels/batch.py
            **({"formats": [c.to_dict() for c in lm.format_kernels]} if lm.format_kernels else {}),
        },
    }


def files_info(lm: LanguageModel) -> dict | None:
    """What a trace says about the model's files (docs/trace.md, `model_files`), if they were kept."""
    return lm.files.to_dict() if lm.files is not None else None


def trace_prompt(
    lm: LanguageModel,
    prompt: str,
    *,
    generate_tokens: int = 0,
    settings: SamplingSettings | None = None,
    use_cache: bool = True,
    topk: int = 10,
    on_step: Callable[[dict], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    quality: bool = False,
    sequences: int = 1,
    batch_prompts: list[str] | None = None,
    ablations: tuple[Ablation, ...] | list[Ablation] = (),
    reserve: int | None = None,
) -> Trace:
    """Records the forward pass over `prompt` and, if asked, a generation that continues it.
    With `quality`, a model in another format than float32 is also measured against float32 on
    the same checkpoint over the prompt's positions (`gpt2viz.quality`). `sequences` > 1
    continues the prompt that many times together; `batch_prompts` continues the prompt and each
    of them together, padded to the longest (both: the trace's `batch`). `ablations`
    (gpt2viz.interventions) switch parts of the model off for every pass; the trace lists them.
    `reserve`: the positions the pass's KV cache allocates at once (`record_forward`)."""
    config = lm.config
    for ablation in ablations:
        ablation.check(config.n_layer, config.n_head, config.d_mlp)
    with applied(lm.hooks, ablations):  # every pass below runs with the parts switched off
        ids, notices = prepare_prompt(lm, prompt)
        if generate_tokens > 0 and sequences == 1 and not batch_prompts:  # refused before any pass runs
            check_generation_size(config.n_ctx - len(ids), generate_tokens, topk)
        events, forward_ms = record_forward(lm, ids, use_cache=use_cache, topk=topk, reserve=reserve)
        measured = _measure_quality(lm, ids, ablations) if quality else None
        generation = batch = None
        if generate_tokens > 0 and batch_prompts:  # several prompts together: the `batch` part
            others = []
            for text in batch_prompts:
                other, said = prepare_prompt(lm, text)
                others.append(other)
                notices.extend(said)
            batch = record_prompts(lm, [ids] + others, generate_tokens, settings or SamplingSettings())
        elif generate_tokens > 0 and sequences > 1:  # several continuations together: the `batch` part
            batch = record_batch(lm, ids, sequences, generate_tokens, settings or SamplingSettings())
        elif generate_tokens > 0:
            generation = record_generation(
                lm, ids, generate_tokens, settings or SamplingSettings(), use_cache, topk, on_step, should_stop
            )
            made = len(generation["ids"])
            if generation["stop_reason"] == STOP_CONTEXT and made < generate_tokens:
                notices.append(
                    notice("generation_cut", n_ctx=lm.config.n_ctx, prompt_tokens=len(ids), made=made, asked=generate_tokens)
                )
    return Trace(
        model=model_info(lm),
        prompt=prompt if isinstance(prompt, str) else lm.tokenizer.decode(ids),
        tokens=token_table(lm, ids),
        events=events,
        generation=generation,
        notices=list(lm.notices) + notices,
        timings={"forward_ms": ev.rnd(forward_ms)},
        quality=measured,
        batch=batch,
        interventions=[ablation.spec for ablation in ablations],
        model_files=files_info(lm),
    )
