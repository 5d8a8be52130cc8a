"""What a trace must be for gpt2viz to show it: every field docs/trace.md describes, checked when the
trace is read (`gpt2viz.trace.load`), with the field's path in the error.

Two kinds of check, as docs/trace.md says:
- **each field on its own**: its type, its range, whether it may be missing, and no field a trace
  does not have. The published schema (docs/trace.schema.json) says exactly the same of every
  field; tests/test_trace_format.py holds the two to it, by mutating every field of real dumps;
- **the cross-field rules** that JSON Schema cannot say (docs/trace.md, "Cross-field rules"):
  sizes from the trace's own config and positions (n_layer, n_head, n_embd, vocab_size, n_ctx; T
  positions computed, `past` cached, L = past + T), ids and blocks within them, fields that
  repeat another, sums, orders, the stages of the config's blocks, whole numbers written without
  a fraction. Their errors are `RuleBroken`, which names the rule.

This module checks the document, its model, tokens, notices, generation, batch and cost lab; the
events are event_checks.py's, `model_files` file_checks.py's, and the checks of one field
field_checks.py's.

A replayed trace is untrusted input (a file anyone may have written), and the screens read it
without checking anything again: whatever passes `check_document` is a trace the recorder could
have written, up to the values of its numbers. Every number is finite (JSON has no NaN) and at
most `MAX_MAGNITUDE` in size; integers are ints, never booleans. A field may be missing only where
the schema does not require it: traces of an earlier gpt2viz lack some.
"""

from __future__ import annotations

import functools
import re

from ..batch import MAX_BATCH
from ..errors import ConfigError, SettingError
from ..generate import MAX_SEED, MAX_TEMPERATURE, SamplingSettings
from ..i18n import _, placeholders, table
from ..i18n.language import DEFAULT
from ..interventions import Ablation, AblationError
from ..kernels.choice import KERNELS, REASONS, agrees
from ..kernels.formats import FORMATS as CONVERTED_FORMATS, KERNELS as FORMAT_KERNELS, REASONS as FORMAT_REASONS
from ..kernels.split import HEAD_MAX_ROWS
from ..model.config import MAX_TOKEN_ID, GPT2Config
from ..model.llama import LIMITS as LLAMA_LIMITS, LlamaConfig
from .document import CONFIG_LIMITS, MAX_INTERVENTIONS, MAX_NOTICES, MAX_TOPK, SCHEMA, SCHEMA_V1
from .event_checks import _check_events, _check_kv_cache, _check_topk
from .field_checks import (
    BIG_INT, BOUNDS, CONFIG, CONFIG_SETTINGS, MAX_ID, MAX_POSITIONS, MIN_POSITIVE, ORDER, RULES, SHORT_TEXT, Sizes,
    SAME, RuleBroken, _at_most, _between, _bool, _check_setting, _choice, _dict, _equal, _fail, _fields, _id, _ids, _token_id,
    _increasing, _int, _ints, _length, _list, _num, _numbers, _positive, _shown, _str, _within,
)
from .file_checks import _check_model_files

__all__ = ["RULES", "RuleBroken", "check_document", "notice_parameters"]

FORMATS = ("float32", "bfloat16", "float16", "int8")
COMPUTE_FORMATS = ("float32", "bfloat16", "float16")
SOURCE_KINDS = ("bundled", "local", "hub", "gguf", "package")
ARCHITECTURES = ("gpt2", "llama")
LLAMA_CONFIG_SETTINGS = ("n_layer", "n_head", "n_kv_head", "n_embd", "d_mlp", "n_ctx", "vocab_size", "rms_norm_eps",
                         "rope_theta", "tie_word_embeddings", "eos_token_id")  # model.architecture: GPT-2's core, or the LLaMA family's (absent: gpt2)
STOP_REASONS = ("eos", "context", "max_new_tokens", "cancelled")
# How far a softmax row's sum may be from 1 after its numbers were rounded to 6 significant
# digits (at most 5e-6 of the sum) and computed in the run's number format (each value within
# half a unit in its last place: 2^-8 of it in bfloat16, 2^-11 in float16, 2^-24 in float32, so
# the sum within 3.9e-3, 4.9e-4 and 6e-8 of 1; the bundled model's worst rows: 2.9e-3, 3.4e-4, 1.8e-6).
SOFTMAX_TOLERANCE = {"float32": 1e-4, "float16": 2e-3, "bfloat16": 1e-2}
MAX_THREADS = MAX_LAB_BATCH = 2**20
MAX_ROW_SEED = 2**64 - 1  # a batch row samples with seed + row

# The number formats the checkpoint's files may hold, in dtype's names, and in safetensors' (what
# traces written before 2026-12-02 say), several joined by '+'.
_STORED = "(float64|float32|bfloat16|float16)"
_STORED_LEGACY = "(F64|F32|BF16|F16)"
_STORED_GGUF = "(F32|F16|BF16|Q4_0|Q4_1|Q8_0)"  # a GGUF file's block formats, GGUF's names
STORED_DTYPE = re.compile(
    f"^({_STORED}(\\+{_STORED})*|{_STORED_LEGACY}(\\+{_STORED_LEGACY})*|{_STORED_GGUF}(\\+{_STORED_GGUF})*)$")
# An ablation spec (gpt2viz.interventions), as the schema's pattern has it.
INTERVENTION = re.compile(r"^L[0-9]+(H[0-9]+|\.heads|\.mlp|\.n[0-9]+(,[0-9]+)*)?(:zero|:mean)?$")

_TOP_REQUIRED = ("schema", "model", "prompt", "tokens", "events", "generation")
_TOP_OPTIONAL = ("context", "notices", "timings", "quality", "batch", "interventions", "cost_lab", "model_files")


def check_document(doc: object) -> None:
    """Refuses `doc` (a decoded JSON document) with a TraceError naming the field at fault unless
    it is a trace as docs/trace.md describes it (a RuleBroken where only a cross-field rule fails)."""
    if type(doc) is not dict:
        _fail("", _("not a gpt2viz trace (expected a JSON object)"))
    schema = doc.get("schema")
    if schema not in (SCHEMA, SCHEMA_V1):
        _fail("schema", _("unsupported trace schema {schema} (this gpt2viz reads {current} and {old})").format(
            schema=_shown(schema), current=SCHEMA, old=SCHEMA_V1))
    _fields(doc, "", _TOP_REQUIRED, _TOP_OPTIONAL)
    model = _dict(doc["model"], "model")
    config = _check_model(model)
    _str(doc["prompt"], "prompt", max_len=None)
    context = _list(doc.get("context", []), "context", MAX_POSITIONS - 1)
    _at_most(context, "context", config.n_ctx - 1, f"n_ctx - 1 = {config.n_ctx - 1}")
    tokens = _list(doc["tokens"], "tokens", MAX_POSITIONS, non_empty=True)
    _at_most(tokens, "tokens", config.n_ctx - len(context), f"n_ctx - len(context) = {config.n_ctx - len(context)}")
    compute = model.get("compute_dtype") or ("float32" if model["dtype"] == "int8" else model["dtype"])
    llama = config.architecture == "llama"
    sizes = Sizes(
        config.n_layer, config.n_head, config.n_embd, config.d_mlp, config.vocab_size, config.n_ctx,
        T=len(tokens), past=len(context), tolerance=SOFTMAX_TOLERANCE[compute],
        n_kv_head=config.n_kv_head if llama else 0, architecture=config.architecture,
    )
    for name, table_, first in (("context", context, 0), ("tokens", tokens, len(context))):
        for i, token in enumerate(table_):
            _check_token(token, f"{name}[{i}]", first + i, sizes)
    _check_notices(doc.get("notices", []), old=schema == SCHEMA_V1)
    if "timings" in doc:
        timings = _fields(doc["timings"], "timings", (), ("forward_ms",))
        if "forward_ms" in timings:
            _num(timings["forward_ms"], "timings.forward_ms", 0.0)
    _check_interventions(doc.get("interventions", []), config)
    _check_events(doc["events"], sizes)
    if doc["generation"] is not None:
        _check_generation(doc["generation"], sizes)
    if doc.get("quality") is not None:
        _check_quality(doc["quality"], "quality", sizes, reference=True)
    if doc.get("batch") is not None:
        _check_batch(doc["batch"], sizes)
    if doc.get("cost_lab") is not None:
        _check_cost_lab(doc["cost_lab"], sizes)
    if doc.get("model_files") is not None:
        _check_model_files(doc["model_files"], model, config)


MAX_KERNEL_PRODUCTS = 16  # distinct weight shapes: GPT-2 has at most five
MAX_KERNEL_LAYERS = 8  # layer names sharing one shape


def _check_kernels(kernels: dict, where: str) -> None:
    """How the recording machine multiplied by the weights (gpt2viz.kernels)."""
    kernels = _fields(kernels, where, ("cpu", "products"), ("batch_packed", "formats"))  # since 2026-12-05
    _str(kernels["cpu"], f"{where}.cpu")
    if "batch_packed" in kernels:
        _bool(kernels["batch_packed"], f"{where}.batch_packed")
    for i, choice in enumerate(_list(kernels.get("formats", []), f"{where}.formats", MAX_KERNEL_PRODUCTS)):
        _check_format_kernel(choice, f"{where}.formats[{i}]")
    for i, product in enumerate(_list(kernels["products"], f"{where}.products", MAX_KERNEL_PRODUCTS)):
        at = f"{where}.products[{i}]"
        product = _fields(product, at, ("product", "n_in", "n_out", "kernel", "max_rows", "reason", "plain_us",
                                        "split_us", "busy", "layers"), ("partial_us", "held_us"))  # since 2026-12-05, -06
        kind = _choice(product["product"], f"{at}.product", ("block", "head"))
        _int(product["n_in"], f"{at}.n_in", 1)
        _int(product["n_out"], f"{at}.n_out", 1)
        kernel = _choice(product["kernel"], f"{at}.kernel", KERNELS)
        rows = _int(product["max_rows"], f"{at}.max_rows", 0, HEAD_MAX_ROWS)  # the split's reach (0: plain)
        reason = _choice(product["reason"], f"{at}.reason", REASONS)
        if not agrees(kind, kernel, reason, rows):
            _fail(f"{at}.kernel", _("{field} is {kernel}, which its reason ({reason}) and max_rows ({rows}) do not "
                                    "agree with").format(field=f"{at}.kernel", kernel=kernel, reason=reason, rows=rows), SAME)
        for key in ("plain_us", "split_us", "partial_us", "held_us"):
            if product.get(key) is not None:
                _positive(product[key], f"{at}.{key}")
        _bool(product["busy"], f"{at}.busy")
        for k, name in enumerate(_list(product["layers"], f"{at}.layers", MAX_KERNEL_LAYERS, non_empty=True)):
            _str(name, f"{at}.layers[{k}]", 100)


def _check_format_kernel(choice: dict, at: str) -> None:
    """The kernel of one weight shape of a bfloat16, float16 or int8 model (kernels/formats.py)."""
    choice = _fields(choice, at, ("product", "n_in", "n_out", "dtype", "kernel", "reason", "timed_us", "busy", "layers"))
    _choice(choice["product"], f"{at}.product", ("block", "head"))
    _int(choice["n_in"], f"{at}.n_in", 1)
    _int(choice["n_out"], f"{at}.n_out", 1)
    _choice(choice["dtype"], f"{at}.dtype", CONVERTED_FORMATS)
    kernel = _choice(choice["kernel"], f"{at}.kernel", FORMAT_KERNELS)
    reason = _choice(choice["reason"], f"{at}.reason", FORMAT_REASONS)
    timed = _dict(choice["timed_us"], f"{at}.timed_us")  # kernel -> its fastest one-row call, µs
    for name, value in timed.items():
        _choice(name, f"{at}.timed_us", FORMAT_KERNELS)
        _positive(value, f"{at}.timed_us.{name}")
    if reason == "fastest" and kernel not in timed:  # chosen as the fastest: its own timing is there
        _fail(f"{at}.timed_us.{kernel}", _("{field} is missing").format(field=f"{at}.timed_us.{kernel}"), SAME)
    _bool(choice["busy"], f"{at}.busy")
    for k, name in enumerate(_list(choice["layers"], f"{at}.layers", MAX_KERNEL_LAYERS, non_empty=True)):
        _str(name, f"{at}.layers[{k}]", 100)


def _check_model(model: dict) -> GPT2Config | LlamaConfig:
    _fields(model, "model", ("name", "source", "config", "n_params", "dtype", "stored_dtype", "device"),
            # missing in traces written before 2026-12-01 (-02, -04, -05)
            ("compute_dtype", "weight_bytes", "step_weight_bytes", "file_bytes", "kernels", "architecture"))
    _str(model["name"], "model.name")
    source = _fields(model["source"], "model.source", ("kind", "path"))
    _choice(source["kind"], "model.source.kind", SOURCE_KINDS)
    _str(source["path"], "model.source.path")
    llama = _choice(model.get("architecture", "gpt2"), "model.architecture", ARCHITECTURES) == "llama"
    if llama:
        config = _fields(model["config"], "model.config", LLAMA_CONFIG_SETTINGS, ("bos_token_id", "pad_token_id"))
        for key in ("n_layer", "n_head", "n_embd", "vocab_size"):  # the trace's own bounds, as GPT-2's
            _check_setting(key, config[key], f"model.config.{key}")
        _int(config["n_ctx"], "model.config.n_ctx", 1, LLAMA_LIMITS["n_ctx"])  # a trace records fewer positions
        _check_setting("n_inner", config["d_mlp"], "model.config.d_mlp")
        _int(config["n_kv_head"], "model.config.n_kv_head", 1, CONFIG_LIMITS["n_head"])
        for key in ("rms_norm_eps", "rope_theta"):
            _num(config[key], f"model.config.{key}", 0.0)
        _bool(config["tie_word_embeddings"], "model.config.tie_word_embeddings")
        for key in ("bos_token_id", "pad_token_id"):  # traces written before 2026-12-06 lack them
            if config.get(key) is not None:
                _token_id(config[key], f"model.config.{key}", config["vocab_size"])
    else:
        config = _fields(model["config"], "model.config", CONFIG_SETTINGS + ("n_inner", "eos_token_id"))
        for key in (*CONFIG_LIMITS, "n_inner"):  # layer_norm_epsilon and activation_function: GPT2Config's own check below
            _check_setting(key, config[key], f"model.config.{key}")
    _int(config["eos_token_id"], "model.config.eos_token_id", 0, MAX_TOKEN_ID)
    _int(model["n_params"], "model.n_params", 1)
    _choice(model["dtype"], "model.dtype", FORMATS)
    if "compute_dtype" in model:
        _choice(model["compute_dtype"], "model.compute_dtype", COMPUTE_FORMATS)
    for key in ("weight_bytes", "step_weight_bytes", "file_bytes"):
        if key in model:
            _int(model[key], f"model.{key}")
    if not STORED_DTYPE.match(_str(model["stored_dtype"], "model.stored_dtype")):
        _fail("model.stored_dtype", _("{field} must be one of {choices}, got {value}").format(
            field="model.stored_dtype", choices="float32, bfloat16, float16, float64 (+ ...)", value=_shown(model["stored_dtype"])))
    _str(model["device"], "model.device")
    if "kernels" in model:
        _check_kernels(model["kernels"], "model.kernels")
    try:  # the checks a config.json gets
        return LlamaConfig.from_saved(config) if llama else GPT2Config.from_saved(config)
    except ConfigError as err:
        # The rules of a config that are cross-field: n_embd divisible by n_head; LLaMA's key/value
        # heads dividing the query heads, and heads of an even size (rotated in pairs).
        cross = config["n_embd"] % config["n_head"] != 0 or llama and (
            config["n_head"] % config["n_kv_head"] != 0 or config["n_embd"] // config["n_head"] % 2 != 0)
        _fail("model.config", _("{field}: {problem}").format(field="model.config", problem=err.problem),
              CONFIG if cross else None)


def _check_token(token: object, field: str, position: int, s: Sizes) -> None:
    token = _fields(token, field, ("position", "id", "text", "bytes"))
    _equal(_int(token["position"], f"{field}.position", 0, MAX_POSITIONS - 1), position, f"{field}.position")
    _id(token["id"], f"{field}.id", s)
    _str(token["text"], f"{field}.text")
    _int(token["bytes"], f"{field}.bytes", 0, SHORT_TEXT)


@functools.cache
def notice_parameters() -> dict[str, frozenset[str]]:
    """Each notice code gpt2viz says, and the parameters its template names."""
    return {key.removeprefix("notice."): frozenset(placeholders(text)) for key, text in table(DEFAULT).items()
            if key.startswith("notice.")}


def _check_notices(notices: object, old: bool) -> None:
    """Notices are codes with parameters, said in the reader's language when shown; a trace of the
    old format holds English sentences instead."""
    notices = _list(notices, "notices", MAX_NOTICES)
    known = None if old else notice_parameters()
    for i, item in enumerate(notices):
        field = f"notices[{i}]"
        if old:
            _str(item, field)
            continue
        item = _fields(item, field, ("code", "params"))
        code = _choice(item["code"], f"{field}.code", tuple(sorted(known)))
        params = _fields(item["params"], f"{field}.params", tuple(sorted(known[code])))
        for name, value in params.items():
            where = f"{field}.params.{name}"
            if type(value) is str:
                _str(value, where)
            elif type(value) is not bool:
                _num(value, where, -BIG_INT, BIG_INT)


def _check_interventions(specs: object, config: GPT2Config) -> None:
    """Ablation specs ("L3H5") naming parts the trace's model has."""
    specs = _list(specs, "interventions", MAX_INTERVENTIONS)
    for i, spec in enumerate(specs):
        field = f"interventions[{i}]"
        if not INTERVENTION.search(_str(spec, field)):
            problem = _("{spec!r} is not an ablation: write L3H5 (a head), L3.heads, L3.mlp, L3 (a block) or "
                        "L3.n12,40 (neurons), optionally followed by :mean").format(spec=spec)
            _fail(field, _("{field}: {problem}").format(field=field, problem=problem))
        try:
            Ablation.parse(spec).check(config.n_layer, config.n_head, config.d_mlp)
        except AblationError as err:
            _fail(field, _("{field}: {problem}").format(field=field, problem=err), BOUNDS)


# -- generation, batch, quality, cost lab -------------------------------------------------------


def _check_settings(settings: object, field: str, s: Sizes) -> None:
    """Sampling settings gpt2viz.generate.SamplingSettings takes (the generation view makes one)."""
    settings = _fields(settings, field, ("temperature", "top_k", "top_p", "seed", "greedy"))
    temperature = _num(settings["temperature"], f"{field}.temperature", 0.0, MAX_TEMPERATURE)
    top_k = _int(settings["top_k"], f"{field}.top_k", 1, MAX_ID + 1, null=True)
    _between(settings["top_p"], f"{field}.top_p", "(0, 1]", lambda v: 0 < v <= 1, null=True)
    _int(settings["seed"], f"{field}.seed", 0, MAX_SEED, null=True)
    _equal(_bool(settings["greedy"], f"{field}.greedy"), temperature == 0, f"{field}.greedy", "temperature == 0", None)
    try:  # what else the generation view needs of them
        SamplingSettings(temperature, top_k, settings["top_p"], settings["seed"])
    except SettingError as err:
        _fail(f"{field}.{err.setting}", err.naming(f"{field}.{err.setting}"))
    if top_k is not None:
        _within(top_k, f"{field}.top_k", 1, s.vocab)


def _check_timing(record: dict, field: str, keys: tuple[str, ...]) -> None:
    for key in keys:
        if key in record:
            _num(record[key], f"{field}.{key}", 0.0, null=True)


_GENERATION = ("cache", "settings", "max_new_tokens", "ids", "text", "stop_reason", "cancelled", "steps", "ttft_ms",
               "mean_decode_ms", "tokens_per_s")
_STEP = ("step", "id", "text", "ms", "used_cache", "context_length", "raw", "candidates", "chosen_prob", "kv_cache")


def _check_generation(gen: object, s: Sizes) -> None:
    field = "generation"
    # topk and stream_gb_s are missing in traces written before 2026-12-01, others_cpu before 2026-12-02
    gen = _fields(gen, field, _GENERATION, ("topk", "stream_gb_s", "others_cpu"))
    _others_cpu(gen, field)
    _bool(gen["cache"], f"{field}.cache")
    _check_settings(gen["settings"], f"{field}.settings", s)
    _int(gen["max_new_tokens"], f"{field}.max_new_tokens", 0, MAX_POSITIONS)  # what was asked: may pass the context
    topk = _int(gen["topk"], f"{field}.topk", 1, MAX_TOPK) if "topk" in gen else None
    stop_reason = _choice(gen["stop_reason"], f"{field}.stop_reason", STOP_REASONS)
    _equal(_bool(gen["cancelled"], f"{field}.cancelled"), stop_reason == "cancelled", f"{field}.cancelled",
           'stop_reason == "cancelled"', None)
    _str(gen["text"], f"{field}.text", max_len=None)
    _check_timing(gen, field, ("ttft_ms", "mean_decode_ms", "tokens_per_s", "stream_gb_s"))
    steps = _list(gen["steps"], f"{field}.steps", MAX_POSITIONS, non_empty=stop_reason == "eos")  # the end-of-text token is the last step
    ids = _ids(gen["ids"], f"{field}.ids", s, MAX_POSITIONS)
    for n, step in enumerate(steps):
        where = f"{field}.steps[{n}]"
        step = _fields(step, where, _STEP)
        number = _int(step["step"], f"{where}.step", 0, MAX_POSITIONS)
        _id(step["id"], f"{where}.id", s)
        _str(step["text"], f"{where}.text")
        _num(step["ms"], f"{where}.ms", 0.0, null=True)
        _bool(step["used_cache"], f"{where}.used_cache")
        for key in ("raw", "candidates"):  # empty when the distribution was not finite
            _check_topk(step[key], f"{where}.{key}", s, kind="probs")
        _num(step["chosen_prob"], f"{where}.chosen_prob", 0.0, 1.0, null=True)
        context_length = _int(step["context_length"], f"{where}.context_length", 1, MAX_POSITIONS)
        if step["kv_cache"] is not None:
            _check_kv_cache(step["kv_cache"], f"{where}.kv_cache", s, length=None)
        _within(number, f"{where}.step", 0, s.n_ctx)
        _within(context_length, f"{where}.context_length", 1, s.n_ctx)
        if topk is not None:
            for key in ("raw", "candidates"):
                _at_most(step[key]["ids"], f"{where}.{key}.ids", topk, f"topk = {topk}")
    _at_most(steps, f"{field}.steps", s.n_ctx, f"n_ctx = {s.n_ctx}")
    _length(ids, f"{field}.ids", len(steps), f"len(steps) = {len(steps)}")
    for n, step in enumerate(steps):
        _equal(ids[n], step["id"], f"{field}.ids[{n}]", f"{field}.steps[{n}].id")


_AGREEMENT = ("positions", "max_abs_dlogit", "top1_agreement", "mean_kl")


def _check_quality(quality: object, field: str, s: Sizes, reference: bool = False) -> None:
    """A run against float32 over the prompt's positions (`reference`: the trace's own `quality`,
    which names float32)."""
    quality = _fields(quality, field, _AGREEMENT, ("reference",) if reference else ())
    if "reference" in quality:
        _choice(quality["reference"], f"{field}.reference", ("float32",))
    positions = _int(quality["positions"], f"{field}.positions", 0, MAX_POSITIONS)
    _num(quality["max_abs_dlogit"], f"{field}.max_abs_dlogit", 0.0, null=True)
    _num(quality["top1_agreement"], f"{field}.top1_agreement", 0.0, 1.0)
    _num(quality["mean_kl"], f"{field}.mean_kl", null=True)
    _within(positions, f"{field}.positions", 0, s.n_ctx)


def _check_batch(batch: object, s: Sizes) -> None:
    field = "batch"
    batch = _fields(batch, field, ("size", "rows", "step_ms"),
                    ("settings", "max_new_tokens", "ttft_ms", "mean_decode_ms", "tokens_per_s"))
    size = _int(batch["size"], f"{field}.size", 1, MAX_BATCH)
    if "settings" in batch:
        _check_settings(batch["settings"], f"{field}.settings", s)
    if "max_new_tokens" in batch:
        _int(batch["max_new_tokens"], f"{field}.max_new_tokens", 0, MAX_POSITIONS)
    rows = _list(batch["rows"], f"{field}.rows", MAX_BATCH)
    for r, row in enumerate(rows):
        where = f"{field}.rows[{r}]"
        row = _fields(row, where, ("ids", "text"), ("row", "seed", "stop_reason", "prompt", "prompt_ids"))
        if "row" in row:
            _int(row["row"], f"{where}.row", 0, MAX_BATCH - 1)
        if "seed" in row:
            _int(row["seed"], f"{where}.seed", 0, MAX_ROW_SEED, null=True)
        for key in ("ids", "prompt_ids"):
            if key in row:
                ids = _ids(row[key], f"{where}.{key}", s, MAX_POSITIONS)
                _at_most(ids, f"{where}.{key}", s.n_ctx, f"n_ctx = {s.n_ctx}")
        _str(row["text"], f"{where}.text", max_len=None)
        if "prompt" in row:
            _str(row["prompt"], f"{where}.prompt", max_len=None)
        if "stop_reason" in row:
            _choice(row["stop_reason"], f"{where}.stop_reason", STOP_REASONS)
    step_ms = _numbers(batch["step_ms"], f"{field}.step_ms", MAX_POSITIONS, 0.0, null=False)
    _check_timing(batch, field, ("ttft_ms", "mean_decode_ms", "tokens_per_s"))
    _length(rows, f"{field}.rows", size, f"size = {size}")
    for r, row in enumerate(rows):
        if "row" in row:
            _equal(row["row"], r, f"{field}.rows[{r}].row")
    _at_most(step_ms, f"{field}.step_ms", s.n_ctx, f"n_ctx = {s.n_ctx}")


_LAB = ("model", "precision", "n_params", "n_ctx", "vocab_size", "machine", "costs")
_COSTS = ("weight_bytes", "kv_bytes_per_position", "flops_per_row", "flops_per_cached_position")


def _check_cost_lab(lab: object, s: Sizes) -> None:
    """The cost lab's result (gpt2viz.cost_lab.LabResult.to_dict), as the lab screen draws it."""
    field = "cost_lab"
    lab = _fields(lab, field, _LAB, ("context", "batch", "precision_formats"))
    _str(lab["model"], f"{field}.model")
    _choice(lab["precision"], f"{field}.precision", FORMATS)
    _int(lab["n_params"], f"{field}.n_params")
    n_ctx = _int(lab["n_ctx"], f"{field}.n_ctx", 1, MAX_POSITIONS)
    vocab = _int(lab["vocab_size"], f"{field}.vocab_size", 1, MAX_ID + 1)
    machine = _fields(lab["machine"], f"{field}.machine", ("stream_gb_s", "compute_gflop_s", "threads"), ("others_cpu",))
    _others_cpu(machine, f"{field}.machine")
    for key in ("stream_gb_s", "compute_gflop_s"):
        _positive(machine[key], f"{field}.machine.{key}")
    _int(machine["threads"], f"{field}.machine.threads", 1, MAX_THREADS)
    costs = _fields(lab["costs"], f"{field}.costs", _COSTS)
    for key in _COSTS:
        _int(costs[key], f"{field}.costs.{key}")
    _equal(n_ctx, s.n_ctx, f"{field}.n_ctx", "model.config.n_ctx")
    _equal(vocab, s.vocab, f"{field}.vocab_size", "model.config.vocab_size")
    if lab.get("context") is not None:
        _check_context_sweep(lab["context"], f"{field}.context", s)
    if lab.get("batch") is not None:
        _check_batch_sweep(lab["batch"], f"{field}.batch", s)
    if lab.get("precision_formats") is not None:
        _check_precision_sweep(lab["precision_formats"], f"{field}.precision_formats", s)


def _others_cpu(sweep: dict, field: str) -> None:
    """An experiment's (or the machine's rates') `others_cpu`: a share of the CPUs, 0 to 1, or
    null (unknown); optional."""
    if "others_cpu" in sweep:
        _num(sweep["others_cpu"], f"{field}.others_cpu", 0.0, 1.0, null=True)


def _check_context_sweep(sweep: object, field: str, s: Sizes) -> None:
    sweep = _fields(sweep, field, ("positions", "naive_ms", "cached_ms", "start", "end", "complete"), ("others_cpu",))
    _others_cpu(sweep, field)
    start = _int(sweep["start"], f"{field}.start", 0, MAX_POSITIONS)
    end = _int(sweep["end"], f"{field}.end", 0, MAX_POSITIONS)
    _bool(sweep["complete"], f"{field}.complete")
    positions = _ints(sweep["positions"], f"{field}.positions", MAX_POSITIONS, 0, MAX_POSITIONS - 1)
    times = {key: _numbers(sweep[key], f"{field}.{key}", MAX_POSITIONS, MIN_POSITIVE, null=False)
             for key in ("naive_ms", "cached_ms")}
    _within(end, f"{field}.end", start, s.n_ctx)
    for k, p in enumerate(positions):
        _within(p, f"{field}.positions[{k}]", start, end - 1)
    _increasing(positions, f"{field}.positions")
    n = len(positions)
    for key, values in times.items():
        _length(values, f"{field}.{key}", n, f"len(positions) = {n}")


_LAB_BATCH_ROW = ("batch", "step_ms", "flops", "bytes_read")


def _check_batch_sweep(sweep: object, field: str, s: Sizes) -> None:
    sweep = _fields(sweep, field, ("context", "rows", "skipped", "complete"), ("others_cpu",))
    _others_cpu(sweep, field)
    context = _int(sweep["context"], f"{field}.context", 0, MAX_POSITIONS)
    _bool(sweep["complete"], f"{field}.complete")
    sizes = []
    for r, row in enumerate(_list(sweep["rows"], f"{field}.rows", MAX_BATCH)):
        at = f"{field}.rows[{r}]"
        row = _fields(row, at, _LAB_BATCH_ROW, ("tokens_per_s", "intensity"))  # both worked out, not read back
        sizes.append(_int(row["batch"], f"{at}.batch", 1, MAX_LAB_BATCH))
        _positive(row["step_ms"], f"{at}.step_ms")
        _int(row["flops"], f"{at}.flops")
        _int(row["bytes_read"], f"{at}.bytes_read", 1)
        for key in ("tokens_per_s", "intensity"):
            if key in row:
                _num(row[key], f"{at}.{key}", 0.0)
    _ints(sweep["skipped"], f"{field}.skipped", MAX_BATCH, 1, MAX_LAB_BATCH)
    _within(context, f"{field}.context", 0, s.n_ctx)
    if sizes and (sizes[0] != 1 or any(a >= b for a, b in zip(sizes, sizes[1:]))):
        _fail(f"{field}.rows", _("{field}: batch sizes must rise from 1").format(field=f"{field}.rows"), ORDER)


_FORMAT_ROW = ("format", "step_ms", "bytes_read", "weight_bytes", "quality")


def _check_precision_sweep(sweep: object, field: str, s: Sizes) -> None:
    sweep = _fields(sweep, field, ("context", "rows", "complete"), ("others_cpu",))
    _others_cpu(sweep, field)
    context = _int(sweep["context"], f"{field}.context", 0, MAX_POSITIONS)
    _bool(sweep["complete"], f"{field}.complete")
    names = []
    for r, row in enumerate(_list(sweep["rows"], f"{field}.rows", len(FORMATS))):
        at = f"{field}.rows[{r}]"
        row = _fields(row, at, _FORMAT_ROW, ("gb_s",))  # worked out, not read back
        names.append(_choice(row["format"], f"{at}.format", FORMATS))
        _positive(row["step_ms"], f"{at}.step_ms")
        _int(row["bytes_read"], f"{at}.bytes_read", 1)
        _int(row["weight_bytes"], f"{at}.weight_bytes")
        if "gb_s" in row:
            _num(row["gb_s"], f"{at}.gb_s", 0.0)
        _check_quality(row["quality"], f"{at}.quality", s)
    _within(context, f"{field}.context", 0, s.n_ctx)
    if len(set(names)) != len(names):
        _fail(f"{field}.rows", _("{field}: each number format appears once").format(field=f"{field}.rows"), ORDER)
