"""GPT-2 hyper-parameters read from a checkpoint's `config.json`.

Only what the forward pass needs is kept. Settings that would change the maths in ways this core
does not implement are refused by name, so a checkpoint never runs silently wrong.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, ClassVar

from ..errors import ConfigError
from ..i18n import _, count
from ..input_files import MAX_CONFIG_BYTES, FileRefused, parse_json, read_regular, shown
from .files import ConfigRecord, config_record

# Names Hugging Face uses for the tanh approximation of GELU that GPT-2 was trained with.
TANH_GELU_NAMES = ("gelu_new", "gelu_pytorch_tanh", "gelu_fast")

# The largest network gpt2viz loads, by setting (GPT-2 xl has 48 blocks of 25 heads, 1,600 wide,
# 1,024 positions and 50,257 tokens). A config.json beyond one of them is refused before anything
# is sized from it; gpt2viz.trace reads traces within the same limits.
LIMITS = {"n_layer": 64, "n_head": 64, "n_embd": 8192, "n_ctx": 4096, "vocab_size": 262_144}
LIMITS["n_inner"] = 4 * LIMITS["n_embd"]
# The largest token id config.json may name (eos_token_id): a tokenizer's ids are 32-bit. It need
# not lie inside the vocabulary (a model whose end-of-text token is never drawn just never stops).
MAX_TOKEN_ID = 2**31 - 1
# What config.json calls each size (GPT2Config's n_ctx is its n_positions, or old configs' n_ctx).
_FILE_KEYS = (("n_layer", "n_layer"), ("n_head", "n_head"), ("n_embd", "n_embd"), ("n_positions", "n_ctx"),
              ("n_ctx", "n_ctx"), ("vocab_size", "vocab_size"), ("n_inner", "n_inner"))

# Settings whose non-default value changes the forward pass; (key, default that we implement).
_UNSUPPORTED_IF_SET = (
    ("scale_attn_by_inverse_layer_idx", False),
    ("reorder_and_upcast_attn", False),
    ("add_cross_attention", False),
    ("scale_attn_weights", True),
)


@dataclass(frozen=True)
class ParamCounts:
    """Where a model's parameters are (weights and biases), by part, in GPT-2's names. A LLaMA-family
    model's parts in them (LlamaConfig.param_counts): wte its token table, no wpe, an RMSNorm's weight,
    c_attn its q, k and v projections, attn_proj o_proj, c_fc gate and up, mlp_proj down, and an LM
    head of its own where it is not tied."""

    wte: int
    wpe: int
    layer_norm: int  # one norm: a LayerNorm's gain and bias (an RMSNorm's weight)
    c_attn: int
    attn_proj: int
    c_fc: int
    mlp_proj: int
    n_layer: int
    lm_head: int = 0  # an LM head's own weight; 0 where it is the token table (tied)

    @property
    def attention(self) -> int:
        """One block's attention: c_attn + c_proj."""
        return self.c_attn + self.attn_proj

    @property
    def mlp(self) -> int:
        """One block's MLP: c_fc + c_proj."""
        return self.c_fc + self.mlp_proj

    @property
    def block(self) -> int:
        """One block: attention, MLP and its two LayerNorms."""
        return self.attention + self.mlp + 2 * self.layer_norm

    @property
    def total(self) -> int:
        """The whole model; a tied LM head reuses wte and adds nothing."""
        return self.wte + self.wpe + self.n_layer * self.block + self.layer_norm + self.lm_head


@dataclass(frozen=True)
class GPT2Config:
    """The shape of a GPT-2 network."""

    architecture: ClassVar[str] = "gpt2"  # what a trace calls the family (model.architecture)

    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    n_ctx: int = 1024
    vocab_size: int = 50257
    layer_norm_epsilon: float = 1e-5
    activation_function: str = "gelu_new"
    n_inner: int | None = None  # MLP width; None means 4 x n_embd
    eos_token_id: int = 50256

    def __post_init__(self) -> None:
        for key in ("n_layer", "n_head", "n_embd", "n_ctx", "vocab_size", "n_inner"):
            check_size(key, getattr(self, key), LIMITS[key], null=key == "n_inner")
        if self.n_embd % self.n_head != 0:
            raise ConfigError(
                _("n_embd ({n_embd}) is not divisible by n_head ({n_head})").format(n_embd=self.n_embd, n_head=self.n_head)
            )
        eps = self.layer_norm_epsilon
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not (0 < eps < 1) or math.isnan(eps):
            raise ConfigError(
                _("{key} must be a small positive number, got {value}").format(key="layer_norm_epsilon", value=shown(eps))
            )
        if not isinstance(self.activation_function, str) or self.activation_function not in TANH_GELU_NAMES:
            raise ConfigError(
                _("activation_function {value} is not supported (gpt2viz implements GPT-2's tanh GELU: {names})").format(
                    value=shown(self.activation_function), names=", ".join(TANH_GELU_NAMES)
                )
            )
        eos = self.eos_token_id
        if isinstance(eos, bool) or not isinstance(eos, int) or not 0 <= eos <= MAX_TOKEN_ID:
            raise ConfigError(
                _("{key} must be a token id, an integer from 0 to {max}, got {value}").format(
                    key="eos_token_id", max=MAX_TOKEN_ID, value=shown(eos))
            )

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.n_embd // self.n_head

    @property
    def norm_eps(self) -> float:
        """The epsilon of every norm (LayerNorm here)."""
        return self.layer_norm_epsilon

    @property
    def n_kv_head(self) -> int:
        """Heads of keys and values (what the KV cache keeps): each query head has its own in GPT-2."""
        return self.n_head

    @property
    def d_mlp(self) -> int:
        """Width of the MLP's hidden layer."""
        return self.n_inner or 4 * self.n_embd

    @property
    def param_counts(self) -> ParamCounts:
        """Parameter counts by part, from the shapes alone."""
        C, F = self.n_embd, self.d_mlp
        return ParamCounts(
            wte=self.vocab_size * C,
            wpe=self.n_ctx * C,
            layer_norm=2 * C,
            c_attn=C * 3 * C + 3 * C,
            attn_proj=C * C + C,
            c_fc=C * F + F,
            mlp_proj=F * C + C,
            n_layer=self.n_layer,
        )

    @property
    def n_params(self) -> int:
        """Parameters in the network, counting the tied LM head once."""
        return self.param_counts.total

    @property
    def step_multiply_adds(self) -> int:
        """Multiply-adds of one new position through every weight product: in each block c_attn
        (C x 3C), attention's c_proj (C x C), the MLP's c_fc and c_proj (C x d_mlp each), then the
        LM head (C x vocab). Attention over the cached positions comes on top."""
        C = self.n_embd
        return self.n_layer * (4 * C * C + 2 * C * self.d_mlp) + C * self.vocab_size

    def kv_bytes_per_position(self, itemsize: int, batch_size: int = 1) -> int:
        """Bytes the KV cache grows by per position: K and V, every layer, every head, every
        sequence of the batch, `itemsize` bytes a number."""
        return 2 * self.n_layer * batch_size * self.n_head * self.head_dim * itemsize

    def to_dict(self) -> dict[str, Any]:
        """The hyperparameters as a plain dict (what a trace records as `model.config`)."""
        return asdict(self)

    @classmethod
    def from_saved(cls, saved: dict[str, Any]) -> "GPT2Config":
        """The config as `to_dict` wrote it (into a trace, say), checked like any other."""
        if not isinstance(saved, dict):
            raise ConfigError(_("expected an object"), where="config")
        return cls(**{f.name: saved[f.name] for f in fields(cls) if f.name in saved})

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> "GPT2Config":
        """Reads Hugging Face's GPT-2 config keys, refusing settings this core does not implement."""
        if not isinstance(raw, dict):
            raise ConfigError(_("expected a JSON object"))
        model_type = raw.get("model_type", "gpt2")
        if model_type != "gpt2":
            raise ConfigError(_("model_type {value} is not GPT-2").format(value=shown(model_type)))
        for key, default in _UNSUPPORTED_IF_SET:
            if key in raw and raw[key] != default:
                raise ConfigError(_("{key}={value} is not supported by gpt2viz").format(key=key, value=shown(raw[key])))
        # The sizes first, by the names the file gives them, before anything is computed from them.
        for key, field_name in _FILE_KEYS:
            if key in raw:
                check_size(key, raw[key], LIMITS[field_name], null=key == "n_inner")
        n_ctx = raw.get("n_positions", raw.get("n_ctx", 1024))
        if "n_ctx" in raw and "n_positions" in raw and raw["n_ctx"] != raw["n_positions"]:
            # Old configs carry both; the position table has n_positions rows.
            n_ctx = raw["n_positions"]
        eos = raw.get("eos_token_id", 50256)
        if isinstance(eos, list) and eos:
            eos = eos[0]
        if eos is None:
            eos = raw.get("vocab_size", 50257) - 1
        return cls(
            n_layer=raw.get("n_layer", 12),
            n_head=raw.get("n_head", 12),
            n_embd=raw.get("n_embd", 768),
            n_ctx=n_ctx,
            vocab_size=raw.get("vocab_size", 50257),
            layer_norm_epsilon=raw.get("layer_norm_epsilon", 1e-5),
            activation_function=raw.get("activation_function", "gelu_new"),
            n_inner=raw.get("n_inner"),
            eos_token_id=eos,
        )

    @classmethod
    def from_file(cls, path: str | Path) -> "GPT2Config":
        """The config of a checkpoint's config.json (ConfigError says what is wrong with it): a
        regular file of at most MAX_CONFIG_BYTES (gpt2viz.input_files), checked as `from_dict`
        checks it."""
        return read_config(path)[0]


def model_type(path: str | Path) -> str:
    """What config.json at `path` says the model is (`model_type`; GPT-2's files may leave it
    out): read as read_config reads it, its errors the same."""
    path = Path(path)
    try:
        raw = parse_json(read_regular(path, MAX_CONFIG_BYTES))
    except FileRefused as err:
        raise ConfigError(err.problem, where=str(path)) from None
    kind = raw.get("model_type", "gpt2") if isinstance(raw, dict) else "gpt2"
    return kind if isinstance(kind, str) else "gpt2"


def read_config(path: str | Path) -> tuple[GPT2Config, ConfigRecord]:
    """`GPT2Config.from_file`, and what the file says as it says it (model/files.py)."""
    path = Path(path)
    try:
        data = read_regular(path, MAX_CONFIG_BYTES)
        raw = parse_json(data)
    except FileRefused as err:
        raise ConfigError(err.problem, where=str(path)) from None
    config = GPT2Config.from_dict(raw)  # refuses anything but a JSON object
    return config, config_record(path, len(data), raw)


def check_size(key: str, value: object, limit: int, null: bool = False) -> None:
    """Refuses a size that is not an integer from 1 to `limit` (or None, where `null`), naming
    `key`, before anything is built or counted from it."""
    if null and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        sentence = (_("{key} must be a positive integer or null, got {value}") if null
                    else _("{key} must be a positive integer, got {value}"))
        raise ConfigError(sentence.format(key=key, value=shown(value)))
    if value > limit:
        raise ConfigError(
            _("{key} is {value}, more than gpt2viz loads (at most {limit})").format(
                key=key, value=count(value) if value.bit_length() <= 64 else shown(value), limit=count(limit)
            )
        )
