"""Snapshots of the Model files stage (where the walk starts) and of the map of the model, at
80 x 24 and 120 x 40, on the bundled `tiny` and on a GPT-2-small-shaped random checkpoint, and in
Chinese at 80 x 24.

The traces are recorded here; what depends on the machine is fixed before drawing: the
checkpoint's directory, whether the system lists memory mappings (Linux does: the weights
are read, not mapped), and the kernels the machine chose. Update after
an intended change with `pytest tests/tui/test_tui_model_files_snapshots.py --snapshot-update`
and look at the SVGs before committing them.
"""

from __future__ import annotations

import copy

import pytest

import gpt2viz
from gpt2viz.i18n import set_language
from gpt2viz.trace import Trace, trace_prompt
from gpt2viz.tui.app import make_app
from gpt2viz.tui.screens.model_map import ModelMapScreen
from gpt2viz.tui.screens.step import StepScreen
from gpt2viz.tui.stages import index_of

SIZES = [(80, 24), (120, 40)]


def fixed(trace: Trace, name: str) -> Trace:
    """A copy of `trace` whose machine-dependent facts read the same everywhere."""
    doc = copy.deepcopy(trace.to_dict())
    doc["model"]["name"] = name
    doc["model"]["source"]["path"] = f"checkpoints/{name}"
    doc["model_files"]["weights"]["mapped"] = False
    # Which kernel is faster, and by how much, is this machine's: one fixed measurement instead.
    doc["model"]["kernels"]["cpu"] = "AMD EPYC 9B14; avx2 fma f16c avx512f avx512_vnni avx512_bf16; torch AVX512"
    for i, product in enumerate(doc["model"]["kernels"]["products"]):
        split = product["product"] == "head"
        product.update(kernel="two-core split" if split else "plain", max_rows=32 if split else 0,
                       reason="faster" if split else "slower", plain_us=100.0 + i, split_us=60.0 + i if split else 150.0 + i,
                       partial_us=None, held_us=None, busy=False)
    doc["model"]["kernels"]["batch_packed"] = name != "tiny"  # where oneDNN is, as on every x86 build
    return Trace.from_dict(doc)


@pytest.fixture(scope="module")
def traces(small_trace) -> dict[str, Trace]:
    # Loaded without measuring: a machine where the LM head's float16 copy is faster would hold
    # (and name) it, and its weights' bytes would be this machine's too.
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("GPT2VIZ_KERNELS", "split")
        bundled = trace_prompt(gpt2viz.load_model("tiny"), "The meaning of life is")
    return {"tiny": fixed(bundled, "tiny"), "gpt2-small": fixed(small_trace, "gpt2-small")}


def at_stage(kind: str | None = None, layer: int | None = None, show_map: bool = False):
    async def run_before(pilot) -> None:
        for _ in range(100):
            await pilot.pause()
            if isinstance(pilot.app.screen, StepScreen):
                break
        screen = pilot.app.screen
        if kind is not None:
            screen.go_to(index_of(screen.stages, kind, layer))
            await pilot.pause()
        if show_map:
            await pilot.press("o")
            for _ in range(20):
                await pilot.pause()
                if isinstance(pilot.app.screen, ModelMapScreen):
                    break
            await pilot.pause()

    return run_before


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
@pytest.mark.parametrize("model", ["tiny", "gpt2-small"])
def test_model_files_stage(snap_compare, traces, model, size):
    """The step-through as it opens: the model's files."""
    app = make_app(trace=traces[model])
    assert snap_compare(app, terminal_size=size, run_before=at_stage())


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
@pytest.mark.parametrize("model", ["tiny", "gpt2-small"])
def test_model_map(snap_compare, traces, model, size):
    """The map over block 3's attention pattern: the block and its attention branch highlighted."""
    app = make_app(trace=traces[model])
    assert snap_compare(app, terminal_size=size, run_before=at_stage("pattern", 3, show_map=True))


@pytest.mark.parametrize("view", ["stage", "map"])
def test_model_files_zh_80x24(snap_compare, traces, view):
    set_language("zh")
    app = make_app(trace=traces["tiny"])
    run_before = at_stage() if view == "stage" else at_stage("mlp", 3, show_map=True)
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)
