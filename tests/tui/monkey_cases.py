"""The suite's key monkey, shared by its two test files (one per language, so that two workers
share the work): every screen, on the bundled model and on a 2-block test checkpoint."""

from __future__ import annotations

import pytest

import gpt2viz
from monkey import OPENERS, run_case

MODELS = ("tiny", "test-2-block")


def cases(language: str) -> list:
    """The runs of one language. In the fast tier each screen once, on `tiny`, in one of the two
    languages (they take turns: the step-through in English, the map in Chinese, ...); in the slow
    tier each screen on `tiny` in the other language, and on the 2-block checkpoint in the fast
    run's language. README: CI runs both, so a CI run sends 36 x 420 = 15,120 keys; the long soak
    (every screen, both languages, both models, many seeds) is benchmarks/monkey_soak.py."""
    out = []
    for model in MODELS:
        for index, target in enumerate(OPENERS):
            fast_language = index % 2 == (language == "zh")
            if model != "tiny" and not fast_language:
                continue
            fast = model == "tiny" and fast_language
            out.append(pytest.param(target, model, id=f"{target}-{model}", marks=[] if fast else [pytest.mark.slow]))
    return out


@pytest.fixture(scope="module")
def bundled():
    return gpt2viz.load_model("tiny")


def monkey_case(language: str, target: str, model: str, bundled, ckpts, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # errors.log goes here
    monkeypatch.chdir(tmp_path)  # the palette's screenshot goes here
    if model == "tiny":
        lm, checkpoint = bundled, "tiny"
    else:
        lm, checkpoint = ckpts.lm("tiny"), str(ckpts.path("tiny"))  # 2 blocks, 4 heads
    sent = run_case(lm, checkpoint, target, language, model, tmp_path / "state" / "gpt2viz" / "errors.log")
    assert sent >= 400
