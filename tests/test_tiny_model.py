"""The shipped tiny model (assets/tiny): loadable by transformers, identical logits in our core,
the held-out perplexity its card claims, and the size limit.

The held-out metric is the one MODEL_CARD.md and tools/train_tiny.py define: tokenize the whole
of heldout.txt, cut it into consecutive non-overlapping windows of n_positions tokens (the last,
shorter window kept if it has at least 2 tokens), mean next-token cross-entropy over all
predictions (fp32 logits), ppl = exp(loss).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from tokenizers import Tokenizer

TINY = Path(__file__).resolve().parent.parent / "assets" / "tiny"
SIZE_LIMIT = 16 * 1024 * 1024
PROMPT = "To be, or not to be, that is the question:\nWhether 'tis nobler in the mind"


def _card_number(label: str) -> float:
    text = (TINY / "MODEL_CARD.md").read_text(encoding="utf-8")
    # the card's result lines: "- Held-out perplexity: **91.32**"
    m = re.search(r"^- " + re.escape(label) + r":\s*\**([0-9]+(?:\.[0-9]+)?)\**", text, re.M)
    assert m, f"MODEL_CARD.md has no '- {label}: <number>' line"
    return float(m.group(1))


def _n_positions() -> int:
    return json.loads((TINY / "config.json").read_text())["n_positions"]


def _heldout_ids() -> list[int]:
    tok = Tokenizer.from_file(str(TINY / "tokenizer.json"))
    return tok.encode((TINY / "heldout.txt").read_text(encoding="utf-8")).ids


def _heldout_loss(forward, ids: list[int], n_positions: int, batch: int = 8) -> float:
    """Mean next-token cross-entropy over the card's windows (full windows run as a batch)."""
    windows = [ids[i : i + n_positions] for i in range(0, len(ids), n_positions)]
    windows = [w for w in windows if len(w) >= 2]
    total, count = 0.0, 0
    with torch.no_grad():
        for start in range(0, len(windows), batch):
            group = windows[start : start + batch]
            # Windows of equal length share a batch; only the last window can be shorter.
            for same in ([w for w in group if len(w) == n_positions], [w for w in group if len(w) < n_positions]):
                if not same:
                    continue
                x = torch.tensor(same)
                logits = forward(x).float()
                assert logits.shape == (len(same), x.size(1), 50257)
                # Each position's target is the next token; the last has none (ignored), so the
                # logits are read in place rather than copied without their last row. A window's
                # rows at a time: the log-probabilities of eight windows at once were 400 MB of new
                # memory each batch, zeroed by the system page by page (26.4 -> 21.6 s).
                targets = torch.cat([x[:, 1:], torch.full((x.size(0), 1), -100)], dim=1).view(-1)
                rows = logits.view(-1, 50257)
                for first in range(0, rows.size(0), 128):
                    total += float(F.cross_entropy(rows[first : first + 128], targets[first : first + 128], reduction="sum"))
                count += x.size(0) * (x.size(1) - 1)
    return total / count


@pytest.fixture(scope="module")
def hf_model():
    from transformers import GPT2LMHeadModel

    model = GPT2LMHeadModel.from_pretrained(str(TINY), dtype=torch.float32)
    model.eval()
    return model


@pytest.fixture(scope="module")
def our_lm():
    import gpt2viz

    return gpt2viz.load_model(str(TINY))


def test_size_limit():
    total = sum(f.stat().st_size for f in TINY.rglob("*") if f.is_file())
    assert total <= SIZE_LIMIT, f"assets/tiny is {total:,} bytes > {SIZE_LIMIT:,}"


def test_checkpoint_files_and_shape(hf_model):
    for name in ("config.json", "model.safetensors", "tokenizer.json", "heldout.txt", "MODEL_CARD.md"):
        assert (TINY / name).is_file(), name
    cfg = hf_model.config
    assert cfg.vocab_size == 50257 and cfg.activation_function == "gelu_new"
    # tied LM head
    assert hf_model.lm_head.weight.data_ptr() == hf_model.transformer.wte.weight.data_ptr()
    tok = Tokenizer.from_file(str(TINY / "tokenizer.json"))
    assert tok.encode("The meaning of life is").ids == [464, 3616, 286, 1204, 318]
    assert tok.encode("<|endoftext|>").ids == [50256]


def test_logits_match_transformers(hf_model, our_lm):
    tok = Tokenizer.from_file(str(TINY / "tokenizer.json"))
    ids = tok.encode(PROMPT).ids
    assert len(ids) > 10
    x = torch.tensor([ids])
    with torch.no_grad():
        ref = hf_model(input_ids=x).logits.float()
        logits, _cache = our_lm.model(x)
    assert logits.shape == ref.shape == (1, len(ids), 50257)
    assert logits.dtype == torch.float32
    err = (logits - ref).abs().max().item()
    assert err < 1e-4, f"max |ours - transformers| = {err:.3g}"
    assert torch.equal(logits[0].argmax(-1), ref[0].argmax(-1))


@pytest.mark.slow  # the whole held-out text through the core (20 s)
def test_heldout_perplexity_matches_card_our_core(our_lm):
    claimed_ppl = _card_number("Held-out perplexity")
    claimed_loss = _card_number("Held-out loss")
    loss = _heldout_loss(lambda x: our_lm.model(x)[0], _heldout_ids(), _n_positions())
    assert abs(math.exp(loss) - claimed_ppl) / claimed_ppl < 0.01, (math.exp(loss), claimed_ppl)
    assert abs(loss - claimed_loss) < 0.01, (loss, claimed_loss)
