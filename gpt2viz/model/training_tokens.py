"""Which tokens a model's training text held: a row of wte whose token never occurred there was
never trained to mean that token (training only moved it along with every other unseen row).

Known only for the bundled model, whose training text the project chose: its checkpoint
directory holds `training_tokens.json` (written by tools/train_tiny.py), a bitmap of the
vocabulary, bit i set when token i occurs in the training text.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

FILE = "training_tokens.json"


def encode(ids: set[int], vocab_size: int, about: str) -> str:
    """The file's text for the token ids `ids` of a `vocab_size` vocabulary."""
    bits = bytearray((vocab_size + 7) // 8)
    for i in ids:
        bits[i // 8] |= 1 << (i % 8)
    return json.dumps(
        {"about": about, "vocab_size": vocab_size, "count": len(ids), "bitmap": base64.b64encode(bytes(bits)).decode()},
        indent=1,
    ) + "\n"


def read(directory: Path, vocab_size: int) -> frozenset[int] | None:
    """The ids of the tokens the training text held, from `directory`'s file for this vocabulary;
    None when there is none (every checkpoint but the bundled one)."""
    path = directory / FILE
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("vocab_size") != vocab_size:
        return None
    bits = base64.b64decode(data["bitmap"])
    ids = frozenset(i for i in range(vocab_size) if bits[i // 8] >> (i % 8) & 1)
    if len(ids) != data["count"]:
        raise ValueError(f"{path}: the bitmap holds {len(ids)} tokens, the file says {data['count']}")
    return ids
