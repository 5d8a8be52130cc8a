"""The suite's key monkey, shared by its two test files (one per language, so that two workers
share the work): every screen, on the bundled model and on a 2-block test checkpoint; the screens
whose words and pictures follow the model's family also on a 2-block LLaMA-family model."""

from __future__ import annotations

import pytest

import gpt2viz
from monkey import OPENERS, run_case
from helpers import state_home

MODELS = ("tiny", "test-2-block")
# The LLaMA-family model's runs (slow tier), one language each, taking turns.
LLAMA = "llama-2-block"
LLAMA_SCREENS = ("step-through", "attribution", "map", "generation")


# A slow run's keys: the 32 slow runs are a soak of the screens the fast runs walk once (the long
# soak, many seeds, is benchmarks/monkey_soak.py); at ~150 keys a second, 120 keys keep the slow
# tier within CI's time (300 a run took 63 CPU-s of the tier's ~245, 200 took 42 of ~230).
SLOW_KEYS_PER_RUN = 120
# A fast run's keys: each screen once, every one of them opened and worked through (the soak's runs
# are monkey.KEYS_PER_RUN, 420, long).
FAST_KEYS_PER_RUN = 300


def _fast(language: str, index: int, model: str) -> bool:
    """Whether screen `index` of OPENERS on `model` in `language` is a fast tier run."""
    return model == "tiny" and index % 2 == (language == "zh")


def cases(language: str) -> list:
    """The runs of one language. In the fast tier each screen once, on `tiny`, in one of the two
    languages (they take turns: the step-through in English, the map in Chinese, ...), 300 keys;
    in the slow tier each screen on `tiny` in the other language, and on the 2-block checkpoint in
    the fast run's language, 120 keys each, and LLAMA_SCREENS on the LLaMA-family model, 120 keys in
    one language each. README: CI runs both, so a CI run sends 14 x 300 + 32 x 120 = 8,040 keys; the
    long soak (every screen, both languages, both models, many seeds) is benchmarks/monkey_soak.py."""
    out = []
    for model in MODELS:
        for index, target in enumerate(OPENERS):
            if model != "tiny" and not _fast(language, index, "tiny"):
                continue
            fast = _fast(language, index, model)
            out.append(pytest.param(target, model, id=f"{target}-{model}", marks=[] if fast else [pytest.mark.slow]))
    for index, target in enumerate(LLAMA_SCREENS):
        if index % 2 == (language == "zh"):
            out.append(pytest.param(target, LLAMA, id=f"{target}-{LLAMA}", marks=[pytest.mark.slow]))
    return out


@pytest.fixture(scope="module")
def bundled():
    return gpt2viz.load_model("tiny")


@pytest.fixture(scope="module")
def llama_small(tmp_path_factory):
    """A 2-block LLaMA-family model from a GGUF file (tests/test_gguf.py) and the file's path."""
    from test_gguf import write_small_gguf

    path, _meant = write_small_gguf(tmp_path_factory.mktemp("llama"))
    return gpt2viz.load_model(str(path)), str(path)


def monkey_case(language: str, target: str, model: str, bundled, ckpts, tmp_path, monkeypatch, request) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(state_home(tmp_path / "state")))  # errors.log goes here
    monkeypatch.chdir(tmp_path)  # the palette's screenshot goes here
    if model == "tiny":
        lm, checkpoint = bundled, "tiny"
    elif model == LLAMA:
        lm, checkpoint = request.getfixturevalue("llama_small")
    else:
        lm, checkpoint = ckpts.lm("tiny"), str(ckpts.path("tiny"))  # 2 blocks, 4 heads
    keys = FAST_KEYS_PER_RUN if model != LLAMA and _fast(language, list(OPENERS).index(target), model) else SLOW_KEYS_PER_RUN
    sent = run_case(lm, checkpoint, target, language, model, tmp_path / "state" / "gpt2viz" / "errors.log", keys)
    assert sent >= keys - 20
