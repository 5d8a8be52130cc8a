"""What the Model files stage says: the files the model came from, what each of config.json's
settings controls, and how the weights were read.

The paragraphs are templates (`stage.model_files.*` in gpt2viz/i18n/<lang>/model_files.py); the
short labels of the picture are msgids here. Every fact comes from the trace (file_facts.py).
"""

from __future__ import annotations

from ..i18n import N_, _, ngettext, plural, say, sentences
from ..kernels.choice import FLOAT16_HELD, PARTIAL_SUMS, PLAIN
from ..text_safety import safe_line
from ..trace import Trace
from ..trace.notices import notice_text
from .facts import RunFacts
from .file_facts import FileFacts, Setting, StoredFile, TokenizerFacts, WeightFacts
from .formatting import clip, count, nbytes, num
from .stages import Stage

DIRECTORY_CELLS = 60  # of a checkpoint's directory quoted in the text

# What each of config.json's settings controls (model.files.CONFIG_KEYS; GPT2Config's n_ctx too).
MEANINGS = {
    "model_type": N_("the architecture: GPT-2"),
    "n_layer": N_("blocks, one after another"),
    "n_head": N_("attention heads in each block"),
    "n_embd": N_("width of every token's vector: the residual stream"),
    "n_positions": N_("the longest context: rows of wpe"),
    "n_ctx": N_("the longest context: rows of wpe"),
    "vocab_size": N_("tokens the model knows: rows of wte, logits per position"),
    "n_inner": N_("width of the MLP's hidden layer"),
    "layer_norm_epsilon": N_("added to the variance in every LayerNorm"),
    "activation_function": N_("the MLP's activation (gelu_new: GELU's tanh form)"),
    "attn_pdrop": N_("dropout on the attention weights: training only"),
    "embd_pdrop": N_("dropout on the embeddings: training only"),
    "resid_pdrop": N_("dropout on each update to the residual stream: training only"),
    "tie_word_embeddings": N_("the LM head reuses wte"),
    "bos_token_id": N_("the id a text starts with"),
    "eos_token_id": N_("the id of the token that ends a text"),
}


# A LLaMA-family model's settings where they mean something else (LlamaConfig's names).
LLAMA_MEANINGS = {
    **MEANINGS,
    "n_head": N_("query heads in each block"),
    "n_kv_head": N_("key/value heads in each block, each shared by n_head / n_kv_head query heads"),
    "n_ctx": N_("the longest context (positions are rotated in, not looked up)"),
    "vocab_size": N_("tokens the model knows: rows of embed_tokens, logits per position"),
    "d_mlp": N_("width of the MLP's gate and up projections"),
    "rms_norm_eps": N_("added to the mean square in every RMSNorm"),
    "rope_theta": N_("the base of the rotation angles: pair j turns by position × rope_theta^(−2j/head_dim)"),
    "tie_word_embeddings": N_("whether the LM head reuses embed_tokens"),
}


def meaning(setting: Setting, d_mlp: int, llama: bool = False) -> str:
    """What `setting` controls, in the current language (`llama`: in a LLaMA-family model)."""
    if setting.key == "n_inner" and setting.value is None:
        return _("width of the MLP's hidden layer; not set, so 4 × n_embd = {width}").format(width=count(d_mlp))
    meanings = LLAMA_MEANINGS if llama else MEANINGS
    return _(meanings[setting.key]) if setting.key in meanings else ""


def value_text(setting: Setting) -> str:
    """A setting's value as config.json writes it ('–' for null; true and false in words)."""
    value = setting.value
    if value is None:
        return "–"
    if isinstance(value, bool):
        return _("true") if value else _("false")
    if isinstance(value, int):
        return str(value) if setting.key.endswith("_id") else count(value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def file_names(files: tuple[StoredFile, ...]) -> str:
    """File names as a list in a sentence."""
    return _(", ").join(f.name for f in files)


def files_bytes(files: tuple[StoredFile, ...]) -> int:
    return sum(f.bytes for f in files)


def model_files_words(trace: Trace, stage: Stage, f: RunFacts, head: int, generate_key: str, replay: bool = False):
    """The Model files stage's paragraphs, formula and shape flow (`replay`: of a saved trace,
    whose recording run loaded the files)."""
    facts = FileFacts.of(trace)
    source = trace.model.get("source") or {}
    directory = clip(str(source.get("path") or trace.model.get("name") or "?"), DIRECTORY_CELLS)
    w, t = facts.weights, facts.tokenizer
    if facts.recorded:
        lead = "stage.model_files.lead_replay" if replay else "stage.model_files.lead"
        paragraphs = [say(lead, directory=directory, weights=file_names(w.files), tokenizer=file_names(t.files))]
    else:
        paragraphs = [say("stage.model_files.lead_unrecorded", directory=directory), say("stage.model_files.unrecorded")]
    paragraphs.append(
        say("stage.model_files.config", n_layer=count(f.n_layer), n_head=count(f.n_head), n_embd=count(f.n_embd),
            n_ctx=count(f.n_ctx), vocab=count(f.vocab))
    )
    if w is not None:
        paragraphs += [_weights(trace, f, w), _head(f, w)]
    if t is not None:
        paragraphs.append(_tokenizer(t))
    kernels = _kernels(trace)
    if kernels:
        paragraphs.append(kernels)
    # What the user was told (the hub, the weights, the prompt), on the stage the walk starts at.
    paragraphs += [say("stage.note", notice=notice_text(notice)) for notice in trace.notices]
    p = f.params
    formula = say("stage.model_files.formula", wte=count(p.wte), wpe=count(p.wpe), n_layer=count(f.n_layer),
                  block=count(p.block), ln_f=count(p.layer_norm), total=count(p.total))
    if facts.recorded:
        flow = [
            say("stage.model_files.flow_config", bytes=nbytes(facts.config_file.bytes)),
            say("stage.model_files.flow_weights", files=file_names(w.files), bytes=nbytes(files_bytes(w.files)),
                tensors=ngettext("{n} tensor", "{n} tensors", w.count).format(n=count(w.count)),
                dtype=f.dtype, device=_device(trace)),
            say("stage.model_files.flow_tokenizer", files=file_names(t.files), bytes=nbytes(files_bytes(t.files)),
                vocab=count(t.vocab_size)),
        ]
    else:
        flow = [say("stage.model_files.flow_config_unrecorded")]
    return "\n\n".join(paragraphs), formula, flow


def _kernels(trace: Trace) -> str:
    """How the recording machine multiplied by each weight shape: one line each (float32's products,
    or another format's: `_format_kernels`; '' for a trace without them)."""
    kernels = trace.model.get("kernels") or {}
    products = kernels.get("products") or []
    if kernels.get("formats"):
        return _format_kernels(trace, kernels)
    if not products:
        return ""
    # Where the LM head's float16 copy was a candidate (timed: `held_us`), the opening names it too.
    opening = "kernels_float16" if any(p.get("held_us") is not None for p in products) else "kernels"
    lines = [say(f"stage.model_files.{opening}", cpu=safe_line(str(kernels.get("cpu", "?"))))]
    for p in products:
        # Its sentence: the reason's ("other digits": kernel.other_digits), or which kernel the
        # variable set ("set by GPT2VIZ_KERNELS": kernel.set_split / kernel.set_plain).
        # The partial sums (traces since 2026-12-05) have a sentence of their own (kernel.partial_sums).
        if p["reason"].startswith("set by"):
            reason = "set_split" if p["kernel"] != PLAIN else "set_plain"
        elif p["kernel"] == PARTIAL_SUMS:
            reason = "partial_sums"
        elif p["kernel"] == FLOAT16_HELD:  # traces since 2026-12-06
            reason = "float16_held"
        else:
            reason = p["reason"].replace(" ", "_")
        # Plain, slower than the halves: the faster of the two splits that were timed.
        splits = [us for us in (p["split_us"], p.get("partial_us")) if us is not None]
        split = min(splits) if reason == "slower" and splits else p["split_us"]
        lines.append(say(
            f"stage.model_files.kernel.{reason}", layers=_(", ").join(safe_line(str(name)) for name in p["layers"]),
            shape=f"{count(p['n_in'])} × {count(p['n_out'])}", plain=_micro(p["plain_us"]), split=_micro(split),
            partial=_micro(p.get("partial_us")), held=_micro(p.get("held_us")),
        ))
    if any(p["kernel"] == PARTIAL_SUMS for p in products):
        lines.append(say("stage.model_files.kernels_partial_sums"))
    if any(p["busy"] and p["plain_us"] is not None for p in products):
        lines.append(say("stage.model_files.kernels_busy"))
    if kernels.get("batch_packed"):
        lines.append(say("stage.model_files.kernels_batch"))
    return "\n".join(lines)


def _format_kernels(trace: Trace, kernels: dict) -> str:
    """A bfloat16, float16 or int8 model's kernels (gpt2viz/kernels/formats.py): one line a shape."""
    choices = kernels["formats"]
    cpu = safe_line(str(kernels.get("cpu", "?")))
    dtype = choices[0]["dtype"]
    header = "stage.model_files.format_kernels_int8" if dtype == "int8" else "stage.model_files.format_kernels"
    lines = [say(header, cpu=cpu, dtype=dtype)]
    for c in choices:
        reason = c["reason"]
        if reason.startswith("set by"):
            reason = "set"
        elif reason == "only kernel":
            reason = "only_plain" if c["kernel"] == "plain 16-bit" else "only_kernel"
        else:
            reason = reason.replace(" ", "_").replace("-", "_")
        timings = _(", ").join(
            say("stage.model_files.format_kernel.timing", kernel=_kernel_name(name), us=_micro(us))
            for name, us in c["timed_us"].items()
        )
        lines.append(say(
            f"stage.model_files.format_kernel.{reason}", layers=_(", ").join(safe_line(str(n)) for n in c["layers"]),
            shape=f"{count(c['n_in'])} × {count(c['n_out'])}", kernel=_kernel_name(c["kernel"]), timings=timings,
        ))
    if any(c["busy"] and c["timed_us"] for c in choices):
        lines.append(say("stage.model_files.kernels_busy"))
    return "\n".join(lines)


def _kernel_name(kernel: str) -> str:
    """A format's kernel as a sentence names it ('oneDNN packed' -> "oneDNN's packed weights")."""
    return say("stage.model_files.kernel_name." + kernel.lower().replace(" ", "_").replace("-", "_"))


def _micro(us: float | None) -> str:
    """Microseconds: whole ones with thousands separated from 100 up ('1,518'), else 3 digits ('8.1')."""
    if us is None:
        return "?"
    return count(round(us)) if us >= 99.5 else num(us, 3)


def _device(trace: Trace) -> str:
    """The device the trace names, shown by gpt2viz.text_safety's rule (a replay's may hold anything)."""
    return safe_line(str(trace.model.get("device") or "cpu"))


def _weights(trace: Trace, f: RunFacts, w: WeightFacts) -> str:
    """What the safetensors file holds, and how the model came to hold it."""
    header = sum(s.json_bytes for s in w.files)  # the JSON, after the 8 bytes that give its length
    what = say(
        plural("stage.model_files.weights", len(w.files)), n=count(len(w.files)), files=file_names(w.files),
        header=nbytes(header), tensors=ngettext("{n} tensor", "{n} tensors", w.count).format(n=count(w.count)),
        data=nbytes(w.data_bytes or 0), n_params=count(f.n_params),
    )
    n, in_place = w.parameters, w.in_place or 0
    facts = {"file": file_names(w.files), "n": count(n), "in_place": count(in_place), "dtype": f.dtype,
             "device": _device(trace), "stored": "+".join(w.dtypes), "weight_bytes": nbytes(f.weight_bytes)}
    if w.in_place is None:
        how = "read"
    elif w.mapped is True:  # a trace of a gpt2viz that used safetensors' mapping of the file
        how = "in_place" if in_place == n else "copied" if in_place == 0 else "partly"
    else:  # read into memory of its own (model/weights.py read_tensors)
        how = "read_as_is" if in_place == n else "read_converted" if in_place == 0 else "read"
    return sentences(what, say(f"stage.model_files.{how}", **facts), _beyond_the_parameters(trace, f))


def _beyond_the_parameters(trace: Trace, f: RunFacts) -> str:
    """Why the model holds more than its parameters take in its format ('' where it does not):
    the layouts its kernels multiply by (kernels/formats.py), and what a decode step reads."""
    if f.dtype not in ("float32", "bfloat16", "float16", "int8"):
        return ""
    plain = f.param_bytes
    if f.weight_bytes <= plain:
        return ""
    if f.dtype == "float32":  # its parameters as they are, and the LM head's float16 copy (kernels/choice.py)
        if not f.float16_head:
            return ""
        key = "extra_float16_head"
    elif f.dtype == "int8":
        key = "extra_int8"
    else:  # whether the LM head multiplies by a copy of its own (a trace before 2026-12-05: bfloat16's did)
        formats = (trace.model.get("kernels") or {}).get("formats") or []
        head = next((c["kernel"] for c in formats if c["product"] == "head"), None)
        key = "extra_head_copy" if (head != "plain 16-bit" if head else f.dtype == "bfloat16") else "extra_packed"
    return say(
        f"stage.model_files.{key}", n_params=count(f.n_params), dtype=f.dtype, plain=nbytes(plain),
        extra=nbytes(f.weight_bytes - plain), step=nbytes(f.step_weight_bytes),
        # The LM head's float16 copy: the token table's numbers, 4 and 2 bytes each.
        n_embd=count(f.config.n_embd), table=nbytes(f.params.wte * 4), half=nbytes(f.params.wte * 2),
    )


def _head(f: RunFacts, w: WeightFacts) -> str:
    """The tied LM head, and the mask buffers a file may carry."""
    head = say("stage.model_files.stored_head") if w.stores_lm_head else say("stage.model_files.tied", wte=count(f.params.wte))
    if not w.buffers:
        return head
    return sentences(head, say(plural("stage.model_files.buffers", w.buffers), n=count(w.buffers)))


BYTE_VALUES = 256  # what a byte-level BPE vocabulary starts from


def _tokenizer(t: TokenizerFacts) -> str:
    added = ngettext("{n} added token", "{n} added tokens", t.added).format(n=count(t.added))
    if t.merges is not None and t.base is not None and t.base > BYTE_VALUES:
        text = say("stage.model_files.tokenizer_more", model=t.model, vocab=count(t.vocab_size), base=count(t.base),
                   others=count(t.base - BYTE_VALUES), merges=count(t.merges), added=added)
    elif t.merges is not None:
        text = say("stage.model_files.tokenizer", model=t.model, vocab=count(t.vocab_size), base=count(t.base),
                   merges=count(t.merges), added=added)
    else:
        text = say("stage.model_files.tokenizer_plain", model=t.model, vocab=count(t.vocab_size), added=added)
    if not t.special:
        return text
    tokens = _(", ").join(special_token(i, token) for i, token in t.special)
    return sentences(text, say("stage.model_files.special", tokens=tokens))


def special_token(token_id: int, text: str) -> str:
    """A special token and its id: '<|endoftext|> (id 50256)'."""
    return _("{text} (id {id})").format(text=text, id=token_id)

