"""`gpt2viz --verify`: the user's checkpoint against transformers, from the command line."""

from __future__ import annotations

import sys

import torch.nn.functional as F

from gpt2viz.cli import main
from gpt2viz.model import layers


def test_a_faithful_checkpoint_verifies(ckpts, capsys):
    assert main(["--verify", "--model", str(ckpts.path("odd-heads")), "The meaning of life is, as everyone knows"]) == 0
    err = capsys.readouterr().err
    assert "max |Δlogit|" in err and "top-1 agreement 9 of 9 positions" in err and "the same 20 tokens" in err
    assert err.strip().endswith("verify: the same model")
    assert "Loading weights" not in err  # transformers' own progress bar stays quiet


def test_a_broken_core_does_not(ckpts, capsys, monkeypatch):
    def erf_gelu_forward(self, x):  # the exact erf GELU, which GPT-2 does not use
        return self.c_proj(F.gelu(self.c_fc(x)))

    monkeypatch.setattr(layers.MLP, "forward", erf_gelu_forward)
    monkeypatch.setattr(layers.MLP, "__call__", erf_gelu_forward)
    # GPT-2 small's width: pre-activations large enough for the two GELUs to part beyond 1e-4.
    assert main(["--verify", "--model", str(ckpts.path("gpt2-small"))]) == 1
    assert "NOT the same model" in capsys.readouterr().err


def test_without_transformers_it_says_how_to_get_it(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)
    assert main(["--verify", "--model", "tiny"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install transformers" in err


def test_verify_does_not_go_with_a_trace(capsys):
    assert main(["--verify", "--json", "-", "--model", "tiny"]) == 2
    assert "--verify" in capsys.readouterr().err


def test_one_position_is_said_in_the_singular(ckpts, capsys):
    """A careless-use walk read 'over 1 positions' and '1 of 1 positions'."""
    assert main(["--verify", "--model", str(ckpts.path("odd-heads")), "Hi"]) == 0
    err = capsys.readouterr().err
    assert "float32, over 1 position:" in err and "top-1 agreement 1 of 1 position\n" in err
