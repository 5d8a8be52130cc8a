"""The core (model, generation, hooks) runs without the UI libraries ever being imported."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import sys
    import torch
    import gpt2viz, gpt2viz.model, gpt2viz.generate, gpt2viz.hooks
    lm = gpt2viz.load_model(sys.argv[1], device="cpu", dtype="float32")
    ids = torch.tensor([lm.tokenizer.encode("The meaning of life is")])
    logits, _ = lm.model(ids)
    assert logits.shape == (1, 5, 50257), logits.shape
    out = lm.generate("Hello", 2)
    assert len(out.token_ids) == 2
    with lm.hooks.subscribe("blocks.*", lambda n, v: None):
        lm.model(ids)
    leaked = sorted(m for m in sys.modules if m.split(".")[0] in ("textual", "rich"))
    assert not leaked, leaked
    print("clean")
    """
)


def test_core_imports_neither_textual_nor_rich(tiny_dir):
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tiny_dir)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "clean"


def test_textual_and_rich_are_installed():
    """The check above would pass vacuously if the UI libraries could not be imported at all."""
    proc = subprocess.run(
        [sys.executable, "-c", "import textual, rich; print('ok')"], capture_output=True, text=True, timeout=120
    )
    assert proc.stdout.strip() == "ok", proc.stderr
