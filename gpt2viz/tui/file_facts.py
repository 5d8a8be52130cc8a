"""The facts of the Model files stage, read off a trace's `model_files` (docs/trace.md): config.json's
settings, the safetensors tensors in groups (wte, wpe, one block's tensors standing for every block,
ln_f), how they were read, and the tokenizer.

No sentences here and nothing drawn (model_files_narration.py words them, widgets/model_files_view.py
draws them). Every text a file gave (names, dtypes, token texts) is read by gpt2viz.text_safety's
display rule: a replayed trace may hold anything. A trace recorded before gpt2viz kept its files' facts has none: `FileFacts.of` then
gives the settings from the trace's config alone.
"""

from __future__ import annotations

import re
import weakref
from dataclasses import dataclass

from ..model.files import BUFFER, CONFIG_KEYS, LM_HEAD, STORED
from ..text_safety import safe_line
from ..trace import Trace

PREFIX = "transformer."
BLOCK = re.compile(r"h\.(\d+)\.(.+)")
# The order a block's tensors are used in (the file lists them alphabetically).
BLOCK_ORDER = (
    "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
    "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias",
)
BEFORE_BLOCKS = ("wte.weight", "wpe.weight")
AFTER_BLOCKS = ("ln_f.weight", "ln_f.bias", "lm_head.weight")
# The trace's config (GPT2Config's names) stands in for config.json in an older trace.
# A LLaMA-family model's config (LlamaConfig's names), read from its GGUF file or config.json.
LLAMA_CONFIG_FIELDS = ("n_layer", "n_head", "n_kv_head", "n_embd", "d_mlp", "n_ctx", "vocab_size", "rms_norm_eps",
                       "rope_theta", "tie_word_embeddings", "eos_token_id")
CONFIG_FIELDS = ("n_layer", "n_head", "n_embd", "n_ctx", "vocab_size", "n_inner", "layer_norm_epsilon",
                 "activation_function", "eos_token_id")


@dataclass(frozen=True)
class Setting:
    """One line of config.json: its key and value as the file writes them."""

    key: str
    value: object  # None: null


@dataclass(frozen=True)
class TensorRow:
    """A stored tensor, or (in the block group) one name that every block stores."""

    name: str  # without the file's `transformer.` prefix; in the block group, without `h.N.`
    dtype: str
    shape: tuple[int, ...]
    bytes: int | None  # one tensor's
    role: str


@dataclass(frozen=True)
class BlockGroup:
    """The tensors of the blocks, one row per name, standing for `blocks` blocks."""

    first: int
    last: int
    blocks: int
    rows: tuple[TensorRow, ...]

    @property
    def tensors(self) -> int:
        """How many tensors the group stands for."""
        return self.blocks * len(self.rows)

    @property
    def bytes(self) -> int | None:
        """The bytes of all of them."""
        sizes = [row.bytes for row in self.rows]
        return None if None in sizes else self.blocks * sum(sizes)


LENGTH_BYTES = 8  # a safetensors file opens with its JSON header's length, a little-endian u64


@dataclass(frozen=True)
class StoredFile:
    """A file as it was read: its name, its size and (safetensors) its header's."""

    name: str
    bytes: int
    header_bytes: int | None = None  # a safetensors file: 8 bytes of length, then its JSON header

    @property
    def json_bytes(self) -> int:
        """A safetensors file's JSON header, without the 8 bytes before it that give its length."""
        return max(0, (self.header_bytes or 0) - LENGTH_BYTES)


@dataclass(frozen=True)
class WeightFacts:
    """The safetensors file(s) as the loader saw them."""

    files: tuple[StoredFile, ...]
    prefix: str  # what every stored name starts with ('transformer.' or '')
    before: tuple[TensorRow, ...]  # wte, wpe
    blocks: BlockGroup | None
    after: tuple[TensorRow, ...]  # ln_f, a stored LM head, anything else
    count: int  # every tensor the files store
    data_bytes: int | None  # their bytes together
    dtypes: tuple[str, ...]  # the parameters' dtypes, as stored
    lm_head: str  # model.files.TIED or STORED
    buffers: int  # mask buffers stored (never read)
    mapped: bool | None
    in_place: int | None
    parameters: int  # tensors the model uses (neither buffers nor a stored LM head)

    @property
    def stores_lm_head(self) -> bool:
        """Whether the file stores a copy of wte as its LM head (else the head is tied: not stored)."""
        return self.lm_head == STORED


@dataclass(frozen=True)
class TokenizerFacts:
    """The tokenizer as loaded."""

    files: tuple[StoredFile, ...]
    model: str
    vocab_size: int
    merges: int | None
    added: int
    special: tuple[tuple[int, str], ...]

    @property
    def base(self) -> int | None:
        """Tokens that are neither merges nor added: the bytes a byte-level BPE starts from."""
        return None if self.merges is None else self.vocab_size - self.merges - self.added


@dataclass(frozen=True)
class FileFacts:
    """What the Model files stage shows of one trace."""

    settings: tuple[Setting, ...]  # config.json's (or, in an older trace, the trace config's)
    config_file: StoredFile | None  # None: an older trace, which kept no file facts
    other_keys: int  # config.json's keys that say nothing about the network
    weights: WeightFacts | None
    tokenizer: TokenizerFacts | None

    @property
    def recorded(self) -> bool:
        """Whether the trace kept its files' facts (traces from before it did have only the config)."""
        return self.config_file is not None

    @classmethod
    def of(cls, trace: Trace) -> "FileFacts":
        """The facts of `trace`, worked out once per trace."""
        facts = _FACTS.get(trace)
        if facts is None:
            facts = _FACTS[trace] = _read(trace)
        return facts


_FACTS: "weakref.WeakKeyDictionary[Trace, FileFacts]" = weakref.WeakKeyDictionary()


def _read(trace: Trace) -> FileFacts:
    files = trace.model_files
    if not isinstance(files, dict):
        config = trace.model.get("config") or {}
        fields = LLAMA_CONFIG_FIELDS if trace.architecture == "llama" else CONFIG_FIELDS
        settings = tuple(Setting(key, config[key]) for key in fields if key in config)
        return FileFacts(settings, None, 0, None, None)
    config = files["config"]
    values = config.get("values") or {}
    settings = tuple(Setting(key, _text(v) if isinstance(v := values[key], str) else v) for key in CONFIG_KEYS if key in values)
    return FileFacts(settings, _file(config["file"]), int(config.get("other_count") or 0),
                     _weights(files["weights"]), _tokenizer(files["tokenizer"]))


def _text(value: object) -> str:
    return safe_line(str(value))


def _file(record: dict) -> StoredFile:
    return StoredFile(_text(record["name"]), int(record["bytes"]), record.get("header_bytes"))


def _weights(record: dict) -> WeightFacts:
    tensors = record.get("tensors") or []
    prefix = PREFIX if tensors and all(str(t["name"]).startswith(PREFIX) for t in tensors) else ""
    top: dict[str, TensorRow] = {}
    block_rows: dict[str, TensorRow] = {}
    blocks: set[int] = set()
    for t in tensors:
        name = _text(str(t["name"])[len(prefix):])
        row = TensorRow(name, _text(t["dtype"]), tuple(t["shape"]), t.get("bytes"), str(t["role"]))
        match = BLOCK.fullmatch(name)
        if match:
            blocks.add(int(match.group(1)))
            block_rows.setdefault(match.group(2), TensorRow(match.group(2), row.dtype, row.shape, row.bytes, row.role))
        else:
            top.setdefault(name, row)
    order = {name: i for i, name in enumerate(BLOCK_ORDER)}
    group = None
    if blocks:
        rows = sorted(block_rows.values(), key=lambda r: (order.get(r.name, len(order)), r.name))
        group = BlockGroup(min(blocks), max(blocks), len(blocks), tuple(rows))
    before = tuple(top.pop(name) for name in BEFORE_BLOCKS if name in top)
    after = tuple(top.pop(name) for name in AFTER_BLOCKS if name in top) + tuple(top.values())
    sizes = [t.get("bytes") for t in tensors]
    parameters = [t for t in tensors if t["role"] not in (BUFFER, LM_HEAD)]
    return WeightFacts(
        files=tuple(_file(f) for f in record.get("files") or []),
        prefix=prefix,
        before=before,
        blocks=group,
        after=after,
        count=len(tensors),
        data_bytes=None if None in sizes else sum(sizes),
        dtypes=tuple(sorted({_text(t["dtype"]) for t in parameters})),
        lm_head=str(record.get("lm_head")),
        buffers=sum(1 for t in tensors if t["role"] == BUFFER),
        mapped=record.get("mapped"),
        in_place=record.get("in_place"),
        parameters=len(parameters),
    )


def _tokenizer(record: dict) -> TokenizerFacts:
    return TokenizerFacts(
        files=tuple(_file(f) for f in record.get("files") or []),
        model=_text(record.get("model") or ""),
        vocab_size=int(record["vocab_size"]),
        merges=record.get("merges"),
        added=int(record.get("added") or 0),
        special=tuple((int(s["id"]), _text(s["text"])) for s in record.get("special_tokens") or []),
    )
