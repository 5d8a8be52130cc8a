"""The checks of a trace's `model_files` (gpt2viz.trace.checks): what the checkpoint's files held,
as the loader saw them (gpt2viz.model.files), each field on its own and against the trace's
config (gpt2viz.trace.field_checks)."""

from __future__ import annotations

import math
import re

from ..i18n import _
from ..input_files import MAX_CONFIG_BYTES, MAX_SAFETENSORS_HEADER_BYTES, MAX_TOKENIZER_BYTES
from ..model.config import GPT2Config
from ..model.files import BUFFER, CONFIG_KEYS, LM_HEAD, MAX_NAME, MAX_NAMES, PARAMETER, ROLES, STORED, TIED
from ..model.weights import FLOAT_DTYPES, MAX_TENSORS, expected_shapes
from .field_checks import (
    BIG_INT, CONFIG_SETTINGS, MAX_ID, ORDER, SIZES, SUMS, _at_most, _bool, _check_setting, _choice, _equal, _fail,
    _fields, _increasing, _int, _ints, _list, _num, _shown, _str, _within,
)

FILE_NAME = re.compile(r"^[^/]+$")
MAX_FILE_NAME = 255
MAX_OTHER_KEYS = MAX_CONFIG_BYTES // 3  # a key of config.json takes 3 bytes at least
PARAMETER_DTYPES = tuple(FLOAT_DTYPES)  # safetensors' names
BUFFER_NAME = re.compile(r"\.attn\.(bias|masked_bias)$")
LM_HEAD_NAME = re.compile(r"^(transformer\.)?lm_head\.weight$")
# config.json's settings that model.config repeats under the same name (its n_ctx is n_positions).
_SAME_SETTINGS = ("n_layer", "n_head", "n_embd", "vocab_size", "n_inner", "layer_norm_epsilon", "activation_function")


def _text(value: object, field: str, max_len: int, file_name: bool = False) -> str:
    """A non-empty string of at most `max_len` characters (a file's name: without a '/')."""
    _str(value, field, max_len)
    if value == "":
        _fail(field, _("{field} must not be empty").format(field=field))
    if file_name and not FILE_NAME.search(value):
        _fail(field, _("{field} must be a file's name, without a '/', got {value}").format(field=field, value=_shown(value)))
    return value


def _file(record: object, field: str, max_bytes: int, header: bool = False, low: int = 0) -> dict:
    record = _fields(record, field, ("name", "bytes") + (("header_bytes",) if header else ()))
    _text(record["name"], f"{field}.name", MAX_FILE_NAME, file_name=True)
    _int(record["bytes"], f"{field}.bytes", low, max_bytes)
    if header:
        _int(record["header_bytes"], f"{field}.header_bytes", 9, 8 + MAX_SAFETENSORS_HEADER_BYTES)
    return record


def _check_model_files(files: object, model: dict, config: GPT2Config) -> None:
    """What the checkpoint's files held, as the loader saw them (gpt2viz.model.files.ModelFiles)."""
    field = "model_files"
    files = _fields(files, field, ("config", "weights", "tokenizer"))
    # config.json
    where = f"{field}.config"
    record = _fields(files["config"], where, ("file", "values", "other_keys", "other_count"))
    _file(record["file"], f"{where}.file", MAX_CONFIG_BYTES, low=1)
    values = _fields(record["values"], f"{where}.values", (), CONFIG_KEYS)
    for key, value in values.items():
        at = f"{where}.values.{key}"
        if key in CONFIG_SETTINGS + ("n_positions", "n_inner"):
            _check_setting(key, value, at)
        elif type(value) is str:
            _str(value, at, MAX_NAME)
        elif value is not None and type(value) is not bool:
            _num(value, at)
    other_keys = _list(record["other_keys"], f"{where}.other_keys", MAX_NAMES)
    for k, key in enumerate(other_keys):
        _text(key, f"{where}.other_keys[{k}]", MAX_NAME)
    other_count = _int(record["other_count"], f"{where}.other_count", 0, MAX_OTHER_KEYS)
    # the safetensors file(s)
    where = f"{field}.weights"
    weights = _fields(files["weights"], where, ("files", "tensors", "lm_head", "mapped", "in_place"))
    stored = [_file(f, f"{where}.files[{i}]", BIG_INT, header=True, low=8)
              for i, f in enumerate(_list(weights["files"], f"{where}.files", MAX_TENSORS, non_empty=True))]
    tensors = _list(weights["tensors"], f"{where}.tensors", MAX_TENSORS, non_empty=True)
    for i, tensor in enumerate(tensors):
        at = f"{where}.tensors[{i}]"
        tensor = _fields(tensor, at, ("name", "file", "dtype", "shape", "bytes", "role"))
        name = _text(tensor["name"], f"{at}.name", 1000)
        _int(tensor["file"], f"{at}.file", 0, MAX_TENSORS - 1)
        dtype = _text(tensor["dtype"], f"{at}.dtype", 16)
        _ints(tensor["shape"], f"{at}.shape", 16, 0, BIG_INT)
        _int(tensor["bytes"], f"{at}.bytes", null=True)
        role = _choice(tensor["role"], f"{at}.role", ROLES)
        if role != BUFFER:
            _choice(dtype, f"{at}.dtype", PARAMETER_DTYPES)
        if (role == BUFFER and not BUFFER_NAME.search(name)) or (role == LM_HEAD and not LM_HEAD_NAME.search(name)):
            _fail(f"{at}.name", _("{field} is {name}, not the name of a tensor whose role is {role}").format(
                field=f"{at}.name", name=_shown(name), role=role))
    lm_head = _choice(weights["lm_head"], f"{where}.lm_head", (TIED, STORED))
    if weights["mapped"] is not None:
        _bool(weights["mapped"], f"{where}.mapped")
    in_place = _int(weights["in_place"], f"{where}.in_place", 0, MAX_TENSORS, null=True)
    # the tokenizer
    at = f"{field}.tokenizer"
    tokenizer = _fields(files["tokenizer"], at, ("files", "model", "vocab_size", "merges", "added", "special_tokens"))
    for i, f in enumerate(_list(tokenizer["files"], f"{at}.files", 2, non_empty=True)):
        _file(f, f"{at}.files[{i}]", MAX_TOKENIZER_BYTES)
    _text(tokenizer["model"], f"{at}.model", 64)
    vocab = _int(tokenizer["vocab_size"], f"{at}.vocab_size", 1, MAX_ID + 1)
    merges = _int(tokenizer["merges"], f"{at}.merges", 0, MAX_ID + 1, null=True)
    added = _int(tokenizer["added"], f"{at}.added", 0, MAX_ID + 1)
    special = _list(tokenizer["special_tokens"], f"{at}.special_tokens", MAX_NAMES)
    for k, token in enumerate(special):
        token = _fields(token, f"{at}.special_tokens[{k}]", ("id", "text"))
        _int(token["id"], f"{at}.special_tokens[{k}].id", 0, MAX_ID)
        _text(token["text"], f"{at}.special_tokens[{k}].text", MAX_NAME)

    # Against the trace's config, and each other.
    where = f"{field}.config"
    for key in _SAME_SETTINGS:
        if key in values:
            _equal(values[key], getattr(config, key), f"{where}.values.{key}", f"model.config.{key}")
    positions = "n_positions" if "n_positions" in values else "n_ctx"
    if positions in values:
        _equal(values[positions], config.n_ctx, f"{where}.values.{positions}", "model.config.n_ctx")
    if other_keys != sorted(set(other_keys)):
        _fail(f"{where}.other_keys", _("{field} must increase").format(field=f"{where}.other_keys"), ORDER)
    _within(other_count, f"{where}.other_count", len(other_keys), MAX_OTHER_KEYS)
    where = f"{field}.weights"
    _at_most(tensors, f"{where}.tensors", 14 * config.n_layer + 5, f"14 n_layer + 5 = {14 * config.n_layer + 5}")
    _at_most(stored, f"{where}.files", len(tensors), f"len(tensors) = {len(tensors)}")
    data = [0] * len(stored)
    for i, record in enumerate(stored):
        _within(record["header_bytes"], f"{where}.files[{i}].header_bytes", 9, record["bytes"])
    expected = expected_shapes(config)
    parameters: dict[str, list] = {}
    for i, tensor in enumerate(tensors):
        at = f"{where}.tensors[{i}]"
        _within(tensor["file"], f"{at}.file", 0, len(stored) - 1)
        bare = tensor["name"].removeprefix("transformer.")
        if tensor["role"] == PARAMETER:
            if bare not in expected or bare in parameters:
                _fail(f"{at}.name", _("{field} is {name}, not a parameter model.config implies").format(
                    field=f"{at}.name", name=_shown(tensor["name"])), SIZES)
            parameters[bare] = tensor["shape"]
            _equal(tensor["shape"], list(expected[bare]), f"{at}.shape", "model.config", SIZES)
        elif tensor["role"] == LM_HEAD:
            _equal(tensor["shape"], list(expected["wte.weight"]), f"{at}.shape", "[vocab_size, n_embd]", SIZES)
        if data is not None and tensor["bytes"] is not None:
            data[tensor["file"]] += tensor["bytes"]
        else:
            data = None
    if len(parameters) != len(expected):
        missing = next(name for name in expected if name not in parameters)
        _fail(f"{where}.tensors", _("{field} has no tensor {name}, which model.config implies").format(
            field=f"{where}.tensors", name=missing), SIZES)
    if data is not None:
        for i, record in enumerate(stored):
            _equal(data[i], record["bytes"] - record["header_bytes"], f"{where}.files[{i}].bytes",
                   "header_bytes + its tensors' bytes", SUMS)
    if "n_params" in model:
        _equal(sum(math.prod(shape) for shape in parameters.values()), model["n_params"], "model.n_params",
               f"{where}.tensors", SUMS)
    _equal(lm_head, STORED if any(t["role"] == LM_HEAD for t in tensors) else TIED, f"{where}.lm_head",
           'a tensor whose role is "lm_head"')
    if in_place is not None:
        _within(in_place, f"{where}.in_place", 0, len(parameters))
    at = f"{field}.tokenizer"
    _within(vocab, f"{at}.vocab_size", 1, config.vocab_size)
    if merges is not None:
        _within(merges, f"{at}.merges", 0, vocab)
    _within(added, f"{at}.added", 0, vocab)
    _at_most(special, f"{at}.special_tokens", added, f"added = {added}")
    ids = [token["id"] for token in special]
    for k, token_id in enumerate(ids):
        _within(token_id, f"{at}.special_tokens[{k}].id", 0, config.vocab_size - 1)
    _increasing(ids, f"{at}.special_tokens")
