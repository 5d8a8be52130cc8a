"""Shared fixtures: random-weight checkpoints written once per session by `transformers`.

Each shape is written (and its reference `GPT2LMHeadModel` kept in memory) the first time a test
asks for it; the loaded gpt2viz model is cached the same way. Tests that need a modified
checkpoint copy or rewrite one into their own `tmp_path`.
"""

from __future__ import annotations

import atexit
import gc
import os
import shutil
import sys
import signal
import tempfile
from pathlib import Path

# The Ctrl-C tests send SIGINT to the CLI processes they start, as a terminal does. A shell without
# job control starts a background command (`pytest ... &` in a script) with SIGINT ignored, every
# process it starts inherits that, and Python then installs no KeyboardInterrupt handler: those
# tests then saw runs that could not be interrupted. Python's own handler here makes the children
# start with SIGINT's default again (an exec resets a handler, not an ignore).
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Under pytest-xdist each worker gets its share of the CPUs for torch's threads, and so do the CLI
# processes it starts (OMP_NUM_THREADS is read when torch loads): two workers of two threads each on
# two cores spin against each other in OpenMP's waits. Measured on the kernels tier: 142 s of wall
# and 211 s of user CPU time with two threads a worker, 85 s and 92 s with one (docs/testing.md).
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // _WORKERS))

import pytest  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

from checkpoints import write_checkpoint  # noqa: E402
from helpers import state_home  # noqa: E402

# The app's state (lesson progress, the error log) goes to a directory of this session's, never the
# user's, where the lesson menu has been answered: apps start on the step-through. A test of the
# menu or of the progress sets an empty one of its own.
_STATE = tempfile.mkdtemp(prefix="gpt2viz-test-state-")
atexit.register(shutil.rmtree, _STATE, ignore_errors=True)
os.environ["XDG_STATE_HOME"] = str(state_home(Path(_STATE)))
# The app's cache (the kernels' measured choices, the package index's models) and the Hugging Face
# hub's (under $XDG_CACHE_HOME unless HF_HOME says otherwise) go to a directory of this run's too,
# never the user's: the suite used to write ~/.cache/gpt2viz/kernels.json. xdist's workers inherit
# the first process's directory, so each uses what another measured, as in a shared user cache (two
# measuring one shape at once only measure it twice).
_CACHE = os.environ.get("GPT2VIZ_TEST_CACHE_HOME")
if _CACHE is None:
    _CACHE = tempfile.mkdtemp(prefix="gpt2viz-test-cache-")
    os.environ["GPT2VIZ_TEST_CACHE_HOME"] = _CACHE
    atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)
os.environ["XDG_CACHE_HOME"] = _CACHE

import gpt2viz  # noqa: E402

from helpers import PROMPT  # noqa: E402,F401 (the parity tests' prompt)
import pilot_speed  # noqa: E402

pilot_speed.install()

# The app's model thread follows the machine's load (gpt2viz.threads): pinned here, so that no
# number a test compares depends on how busy the machine is (tests/test_threads.py tests the policy).
# Pinned to this process's count, never inherited: xdist's workers inherit the controller's
# environment (two threads, set before it gave each worker one), and a model thread on two threads
# beside a test on one gave other last digits where MKL splits a product's sums by thread (an AMD
# EPYC: the attribution screen against the core's numbers), and two workers four spinning threads.
os.environ["GPT2VIZ_THREADS"] = str(torch.get_num_threads())

# The tests of the matrix products' kernels and what rests on them (parity, number formats, the
# cache, batches). CI runs them a second time with the other x86 kind's kernels, the AVX2 ones
# (README: the kernels tier; docs/testing.md): `-m kernels` under FBGEMM_ENABLE_INSTRUCTIONS=AVX2,
# ATEN_CPU_CAPABILITY=avx2 and ONEDNN_MAX_CPU_ISA=AVX2.
KERNEL_TESTS = {
    "test_parity.py", "test_precision.py", "test_fbgemm_float16.py", "test_packed.py", "test_two_core_products.py",
    "test_kv_cache.py", "test_batch.py", "test_tiny_model.py", "test_cpu_kinds.py", "test_format_kernels.py",
    "test_float16_held_head.py",
}


def pytest_ignore_collect(collection_path, config) -> bool | None:
    """Under `-m kernels` alone (the kernels tier), the other test files are not even collected:
    importing and deselecting their ~1,100 tests (the TUI's import Textual) cost that tier 2-4 s
    of its ~42 s (measured twice each way)."""
    if config.getoption("markexpr", "") != "kernels":
        return None
    if collection_path.is_dir():
        return collection_path.name == "tui" or None  # the TUI's tests and their conftest (Textual)
    return (collection_path.name.startswith("test_") and collection_path.name not in KERNEL_TESTS) or None


def pytest_collection_modifyitems(items) -> None:
    # A slow test of these files joins the kernels tier only when marked for it (the int8 model's
    # held-out quality, which the AVX2 kernels change): the others repeat float32 work or read memory.
    # A test marked kernels_once does not depend on the kernels (a cache file's format, gpt2-small's
    # twelve blocks of the widths distilgpt2's six already multiply).
    for item in items:
        if item.path.name in KERNEL_TESTS and item.get_closest_marker("slow") is None and item.get_closest_marker(
            "kernels_once"
        ) is None:
            item.add_marker(pytest.mark.kernels)


def pytest_collection_finish(session) -> None:
    """What is in memory once every test module is imported (torch, transformers, Textual, the
    tests) lives until the end: frozen, Python's collector stops walking it at every full
    collection. Measured: an app's start and ten keys at 120 x 40, 0.46 CPU-s before, 0.41 after
    (docs/testing.md). No test's objects are frozen (this runs before the first test)."""
    gc.collect()
    gc.freeze()


@pytest.fixture
def two_threads():
    """The two-core kernels run only with more than one torch thread; make sure the test exercises them."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """The kernel cache (gpt2viz/kernels/cache.py) in a directory of the test's own, measured
    choices left to each test."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("GPT2VIZ_KERNELS", raising=False)
    return tmp_path / "gpt2viz"


class Checkpoints:
    """Lazily writes and caches one checkpoint per shape for the whole session."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._hf: dict[str, torch.nn.Module] = {}
        self._lm: dict[str, gpt2viz.LanguageModel] = {}

    def path(self, shape: str) -> Path:
        self.hf(shape)
        return self.root / shape

    def hf(self, shape: str):
        """The transformers reference model that was saved for `shape`."""
        if shape not in self._hf:
            self._hf[shape] = write_checkpoint(self.root / shape, shape)
        return self._hf[shape]

    def lm(self, shape: str) -> gpt2viz.LanguageModel:
        """The gpt2viz model loaded (float32, cpu) from the `shape` checkpoint."""
        if shape not in self._lm:
            self._lm[shape] = gpt2viz.load_model(str(self.path(shape)), device="cpu", dtype="float32")
        return self._lm[shape]


@pytest.fixture(scope="session")
def ckpts(tmp_path_factory) -> Checkpoints:
    return Checkpoints(tmp_path_factory.mktemp("checkpoints"))


@pytest.fixture(scope="session")
def tiny_dir(ckpts) -> Path:
    return ckpts.path("tiny")


@pytest.fixture(scope="session")
def tiny_lm(ckpts) -> gpt2viz.LanguageModel:
    return ckpts.lm("tiny")


@pytest.fixture(scope="session")
def tiny_hf(ckpts):
    return ckpts.hf("tiny")


@pytest.fixture(scope="session")
def bundled() -> gpt2viz.LanguageModel:
    """The bundled model (assets/tiny, trained), loaded once per session; files that load their
    own per module shadow this."""
    return gpt2viz.load_model("tiny")


@pytest.fixture(scope="session")
def tokenizer(tiny_lm):
    """The real GPT-2 tokenizer (every checkpoint copies assets/tokenizer/tokenizer.json)."""
    return tiny_lm.tokenizer


@pytest.fixture(autouse=True)
def english_after_each_test():
    """The language is process-wide state: a test that switches to Chinese must not leak it."""
    yield
    from gpt2viz.i18n import set_language

    set_language("en")


@pytest.fixture(scope="session")
def llama_lm(tmp_path_factory):
    """A two-block LLaMA-family model (8 query heads sharing 2 key/value heads) read from a GGUF
    file as llama.cpp writes one (tests/test_gguf.py), with its byte-level BPE tokenizer."""
    import gpt2viz
    from test_gguf import write_small_gguf

    path, _meant = write_small_gguf(tmp_path_factory.mktemp("llama"))
    return gpt2viz.load_model(str(path))


@pytest.fixture(autouse=True)
def _sigint_left_as_it_was():
    """A test that runs the CLI in this process must leave SIGINT's handler as it found it: an
    ignore left behind is inherited by every process the later tests start, and their Ctrl-C
    tests then wait out whole runs (a session's CLI change did this to eight tests)."""
    before = signal.getsignal(signal.SIGINT)
    yield
    after = signal.getsignal(signal.SIGINT)
    if after is not before:
        signal.signal(signal.SIGINT, before)
        pytest.fail(f"the test left SIGINT's handler changed ({after!r} for {before!r})")
