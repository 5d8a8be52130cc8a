"""The two kinds of check a trace's fields get when it is read (gpt2viz.trace.checks), as small
functions that name the field at fault:
- a field on its own, as the published schema (docs/trace.schema.json) says it: its type, its
  range, whether it is there, and no field a trace does not have (`_fields`, `_int`, `_numbers`...);
- the cross-field rules JSON Schema cannot say (docs/trace.md, "Cross-field rules"): a field
  against the trace's config, its positions or another field (`_equal`, `_length`, `_within`...),
  whose errors are `RuleBroken`, naming the rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn

from ..errors import TraceError
from ..i18n import _, ngettext
from ..input_files import shown
from ..model.config import LIMITS, TANH_GELU_NAMES
from .document import CONFIG_LIMITS, MAX_MAGNITUDE


_JSON_WORDS = {None: "null", True: "true", False: "false"}


def _shown(value: object) -> str:
    """A value of the trace as an error quotes it: as JSON writes null, true and false (the file's
    words, not Python's None), anything else as `input_files.shown` does."""
    if value is None or type(value) is bool:
        return _JSON_WORDS[value]
    return shown(value)


MAX_POSITIONS = LIMITS["n_ctx"]  # positions, generation steps, what --generate accepts
MAX_HEADS = LIMITS["n_head"]
MAX_BLOCKS = LIMITS["n_layer"]
MAX_ID = LIMITS["vocab_size"] - 1
MAX_DIM = LIMITS["vocab_size"]  # the largest size of a tensor's dimension (logits: vocab_size)
SHORT_TEXT = 4096  # names, paths, token texts, ablation specs: characters at most
BIG_INT = 2**53  # counts and byte sizes: exact in a double, far beyond any real trace
MIN_POSITIVE = 1e-6  # a measured time (ms) or rate (GB/s) is at least this

# The cross-field rules (docs/trace.md, "Cross-field rules").
SIZES = "sizes"  # a length or a shape set by the config, the positions or another list
BOUNDS = "bounds"  # an id, a block, a head, a neuron, a position within what the config has
SAME = "same"  # a field that repeats another (or its own place in a list) equals it
SUMS = "sums"  # a softmax sums to 1; counts in bins add up to at most the values counted
ORDER = "order"  # most likely first, increasing, each once
STAGES = "stages"  # every stage of the config's blocks once, and no other
INTEGERS = "integers"  # a whole number written without a fraction (7, not 7.0)
CONFIG = "config"  # the config as a config.json is checked: n_embd divisible by n_head
RULES = (SIZES, BOUNDS, SAME, SUMS, ORDER, STAGES, INTEGERS, CONFIG)

_NUMBER_TYPES = {float, int}
_NULLABLE_TYPES = {float, int, type(None)}


class RuleBroken(TraceError):
    """A trace whose fields are each what the schema allows, but which breaks the cross-field rule
    `rule` (one of RULES: docs/trace.md, "Cross-field rules")."""

    def __init__(self, message: str, field: str, rule: str) -> None:
        super().__init__(message, field)
        self.rule = rule


def _fail(field: str, message: str, rule: str | None = None) -> NoReturn:
    raise TraceError(message, field) if rule is None else RuleBroken(message, field, rule)


# -- each field on its own (what the schema says) ------------------------------------------------


def _get(obj: dict, key: str, field: str) -> object:
    if key not in obj:
        _fail(field, _("{field} is missing").format(field=field))
    return obj[key]


def _dict(value: object, field: str) -> dict:
    if type(value) is not dict:
        _fail(field, _("{field} must be an object, got {value}").format(field=field, value=_shown(value)))
    return value


def _fields(value: object, field: str, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict:
    """An object with every key of `required`, perhaps some of `optional`, and no other."""
    obj = _dict(value, field)
    for key in required:
        _get(obj, key, f"{field}.{key}" if field else key)
    if len(obj) > len(required):
        for key in obj:
            if key not in required and key not in optional:
                where = f"{field}.{key}" if field else str(key)
                _fail(where, _("{field}: a trace has no such field").format(field=where))
    return obj


def _str(value: object, field: str, max_len: int | None = SHORT_TEXT) -> str:
    if type(value) is not str:
        _fail(field, _("{field} must be a string, got {value}").format(field=field, value=_shown(value)))
    if max_len is not None and len(value) > max_len:
        _fail(field, _("{field} is {n} characters long, at most {limit}").format(field=field, n=len(value), limit=max_len))
    return value


def _bool(value: object, field: str) -> bool:
    if type(value) is not bool:
        _fail(field, _("{field} must be true or false, got {value}").format(field=field, value=_shown(value)))
    return value


def _null(value: object, field: str) -> None:
    if value is not None:
        _fail(field, _("{field} must be null, got {value}").format(field=field, value=_shown(value)))


def _int(value: object, field: str, low: int = 0, high: int = BIG_INT, null: bool = False) -> int | None:
    """An integer in [low, high]. JSON Schema takes 7.0 for an integer: that one is refused by the
    `integers` rule."""
    if value is None and null:
        return None
    if type(value) is not int or not low <= value <= high:
        message = (
            _("{field} must be an integer from {low} to {high} or null, got {value}")
            if null
            else _("{field} must be an integer from {low} to {high}, got {value}")
        )
        whole = type(value) is float and value.is_integer() and low <= value <= high
        _fail(field, message.format(field=field, low=low, high=high, value=_shown(value)), INTEGERS if whole else None)
    return value


def _num(
    value: object, field: str, low: float = -MAX_MAGNITUDE, high: float = MAX_MAGNITUDE, null: bool = False
) -> float | None:
    if value is None and null:
        return None
    if type(value) not in _NUMBER_TYPES or not low <= value <= high:
        message = (
            _("{field} must be a number from {low} to {high} or null, got {value}")
            if null
            else _("{field} must be a number from {low} to {high}, got {value}")
        )
        _fail(field, message.format(field=field, low=f"{low:g}", high=f"{high:g}", value=_shown(value)))
    return value


def _between(value: object, field: str, interval: str, inside, null: bool = False) -> float | None:
    """A number in an interval with an open end ('(0, 1]'): `inside(value)` says whether it is."""
    if value is None and null:
        return None
    if type(value) not in _NUMBER_TYPES or not inside(value):
        _fail(field, _("{field} must be a number in {interval}, got {value}").format(
            field=field, interval=interval, value=_shown(value)))
    return value


def _positive(value: object, field: str) -> float:
    """A measured time or rate: more than 0, and not so near it that dividing by it overflows."""
    return _num(value, field, MIN_POSITIVE)


def _choice(value: object, field: str, choices: tuple) -> object:
    if type(value) is not str or value not in choices:
        _fail(
            field,
            _("{field} must be one of {choices}, got {value}").format(
                field=field, choices=", ".join(choices), value=_shown(value)
            ),
        )
    return value


def _list(value: object, field: str, limit: int, non_empty: bool = False) -> list:
    """A list of at most `limit` entries (the schema's bound: docs/trace.md, "Limits")."""
    if type(value) is not list:
        _fail(field, _("{field} must be a list, got {value}").format(field=field, value=_shown(value)))
    n = len(value)
    if n > limit:
        _fail(field, ngettext(
            "{field} has {n} entry; a trace holds at most {limit} (docs/trace.md)",
            "{field} has {n} entries; a trace holds at most {limit} (docs/trace.md)", n,
        ).format(field=field, n=n, limit=limit))
    if non_empty and n == 0:
        _fail(field, _("{field} must not be empty").format(field=field))
    return value


def _numbers(
    value: object, field: str, limit: int, low: float = -MAX_MAGNITUDE, high: float = MAX_MAGNITUDE,
    null: bool = True, non_empty: bool = False,
) -> list:
    """A list of at most `limit` numbers in [low, high] (or null, where `null`: a value of the run
    that was not finite). The bulk of a trace is such lists: checked with builtins, one pass each,
    and only a list that fails is looked at number by number to name the culprit."""
    if type(value) is not list or len(value) > limit or (non_empty and not value):
        _list(value, field, limit, non_empty)  # says what is wrong
    row = value
    kinds = set(map(type, row))
    if kinds <= _NUMBER_TYPES:
        finite = row
    elif null and kinds <= _NULLABLE_TYPES:
        finite = [v for v in row if v is not None]
    else:
        finite = None
    ok = finite is not None
    if ok and finite:
        total = sum(finite)  # NaN when a NaN hides from min and max (only a document built in Python has one)
        ok = low <= min(finite) and max(finite) <= high and total == total
    if not ok:
        for j, v in enumerate(row):
            _num(v, f"{field}[{j}]", low, high, null=null)
    return row


def _ints(value: object, field: str, limit: int, low: int, high: int, non_empty: bool = False) -> list:
    """A list of at most `limit` integers in [low, high]."""
    row = _list(value, field, limit, non_empty)
    for j, v in enumerate(row):
        _int(v, f"{field}[{j}]", low, high)
    return row


def _id(value: object, field: str, s: "Sizes") -> int:
    """A token id: below the vocabulary's limit on its own, below the trace's vocab_size by `bounds`."""
    return _token_id(value, field, s.vocab)


def _token_id(value: object, field: str, vocab: int) -> int:
    """A token id of a vocabulary of `vocab` tokens (as `_id`, before the trace's sizes are known)."""
    if type(value) is int and value >= vocab:
        _fail(field, _("{field} must be an integer from {low} to {high}, got {value}").format(
            field=field, low=0, high=vocab - 1, value=value), BOUNDS)
    return _int(value, field, 0, MAX_ID)


def _ids(value: object, field: str, s: "Sizes", limit: int, non_empty: bool = False) -> list:
    ids = _list(value, field, limit, non_empty)
    for j, token_id in enumerate(ids):
        _id(token_id, f"{field}[{j}]", s)
    return ids


def _shape(value: object, field: str, dims: int) -> list:
    """A tensor's shape: `dims` sizes (what they must be is the `sizes` rule)."""
    shape = _ints(value, field, dims, 0, MAX_DIM)
    if len(shape) != dims:
        _fail(field, ngettext("{field} has {n} entry, expected {rule}", "{field} has {n} entries, expected {rule}",
                              len(shape)).format(field=field, n=len(shape), rule=dims))
    return shape


# The settings of a config gpt2viz checks, as model.config gives them.
CONFIG_SETTINGS = ("n_layer", "n_head", "n_embd", "n_ctx", "vocab_size", "layer_norm_epsilon", "activation_function")


def _check_setting(key: str, value: object, field: str) -> None:
    """One of the settings gpt2viz checks in a config.json (`n_positions`: its n_ctx), on its own."""
    if key in CONFIG_LIMITS or key == "n_positions":
        _int(value, field, 1, CONFIG_LIMITS["n_ctx" if key == "n_positions" else key])
    elif key == "n_inner":
        _int(value, field, 1, LIMITS["n_inner"], null=True)
    elif key == "layer_norm_epsilon":
        _between(value, field, "(0, 1)", lambda v: 0 < v < 1)
    else:
        _choice(value, field, TANH_GELU_NAMES)


# -- the cross-field rules -----------------------------------------------------------------------


def _equal(value: object, expected: object, field: str, rule_text: str = "", rule: str = SAME) -> None:
    """`value` must be `expected`; `rule_text` says where that comes from, as a formula ('[1, T, n_embd]')."""
    if value != expected or type(value) is not type(expected):
        message = _("{field} must be {expected} ({rule}), got {value}") if rule_text else _("{field} must be {expected}, got {value}")
        _fail(field, message.format(field=field, expected=_shown(expected), rule=rule_text, value=_shown(value)), rule)


def _length(value: list, field: str, length: int, rule_text: str) -> list:
    """Exactly `length` entries, as `rule_text` (a formula: 'T = 5') says."""
    n = len(value)
    if n != length:
        _fail(field, ngettext("{field} has {n} entry, expected {rule}", "{field} has {n} entries, expected {rule}", n)
              .format(field=field, n=n, rule=rule_text), SIZES)
    return value


def _at_most(value: list, field: str, length: int, rule_text: str) -> list:
    n = len(value)
    if n > length:
        _fail(field, ngettext("{field} has {n} entry, at most {rule}", "{field} has {n} entries, at most {rule}", n)
              .format(field=field, n=n, rule=rule_text), SIZES)
    return value


def _within(value: int | float, field: str, low: int | float, high: int | float) -> None:
    """An index or a count within what the config (or another field) allows: the `bounds` rule."""
    if not low <= value <= high:
        _fail(field, _("{field} must be a number from {low} to {high}, got {value}").format(
            field=field, low=f"{low:g}", high=f"{high:g}", value=_shown(value)), BOUNDS)


def _probabilities(row: list, field: str, tolerance: float, sums_to_one: bool) -> None:
    """A whole softmax row (`sums_to_one`) sums to 1 within `tolerance`, any other set of its
    probabilities to at most 1 + `tolerance`."""
    if None in row:
        return  # a run whose values were not finite: no sum to speak of
    total = sum(row)
    if total > 1 + tolerance or (sums_to_one and total < 1 - tolerance):
        _fail(field, _("{field} sums to {total}; probabilities of one softmax sum to 1").format(
            field=field, total=f"{total:.6g}"), SUMS)


def _most_likely_first(values: list, field: str) -> None:
    known = [v for v in values if v is not None]
    if any(a < b for a, b in zip(known, known[1:])):
        _fail(field, _("{field} is not in order, most likely first").format(field=field), ORDER)


def _increasing(values: list, field: str) -> None:
    if any(a >= b for a, b in zip(values, values[1:])):
        _fail(field, _("{field} must increase").format(field=field), ORDER)


# -- the sizes of this trace ---------------------------------------------------------------------


@dataclass(frozen=True)
class Sizes:
    """What the trace's config and token table say every list's length must be."""

    n_layer: int
    n_head: int
    n_embd: int
    d_mlp: int
    vocab: int
    n_ctx: int
    T: int  # positions the recorded pass computed
    past: int  # positions already in the KV cache
    tolerance: float  # how far a softmax row may sum from 1 in this run's number format
    n_kv_head: int = 0  # key/value heads (LLaMA's grouped attention); 0: one per query head (GPT-2)
    architecture: str = "gpt2"  # which core recorded it: which stages it has

    @property
    def kv_heads(self) -> int:
        """Heads of keys and values (what the KV cache keeps)."""
        return self.n_kv_head or self.n_head

    @property
    def L(self) -> int:
        """Every position a query sees: the cached ones and the computed ones."""
        return self.past + self.T

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head


