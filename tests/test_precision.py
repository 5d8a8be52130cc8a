"""Number formats: each gives float32's answers within its precision, stores smaller weights,
and computes a cached decode step as a full pass does."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

import gpt2viz
from gpt2viz.errors import SettingError
from gpt2viz.kernels import fbgemm_float16 as F16, int8 as I8, packed
from gpt2viz.model import precision as P
from gpt2viz.quality import compare_logits, heldout

PROMPT = "The meaning of life is, as everyone knows, not 42."
FORMATS = ("bfloat16", "float16", "int8")


@pytest.fixture(scope="module")
def models(tiny_dir):
    return {name: gpt2viz.load_model(str(tiny_dir), dtype=name) for name in ("float32", *FORMATS)}


def test_names_and_what_each_format_stores(models):
    assert P.parse_precision("bf16").name == "bfloat16" and P.parse_precision(torch.float16).name == "float16"
    with pytest.raises(SettingError, match="int4"):
        P.parse_precision("int4")
    f32 = models["float32"]
    for name, lm in models.items():
        assert lm.precision == name and lm.n_params == f32.n_params
    assert models["bfloat16"].model.dtype == torch.bfloat16 and models["float16"].model.dtype == torch.float16
    assert models["int8"].model.dtype == torch.float32  # int8 weights, float32 activations and cache
    assert models["float16"].model.new_cache().keys[0].dtype == torch.float16
    # float16: two bytes a weight; where fbgemm multiplies (inputs padded to a multiple of 512,
    # at most a third more; outputs to whole SIMD columns), the padded pack and a float32 bias.
    wte = models["bfloat16"].model.wte.weight
    extra = 0
    sites = zip(packed.product_sites(f32.model), packed.product_sites(models["float16"].model))
    for (parent, name), (parent16, name16) in sites:
        (n_in, n_out), layer = getattr(parent, name).weight.shape, getattr(parent16, name16)
        via_fbgemm = isinstance(layer, F16.Float16Linear)
        assert not via_fbgemm or 3 * F16.padded_rows(n_in) <= 4 * n_in  # this model's 64 and 256: never
        if via_fbgemm:
            extra += F16.padded_rows(n_in) * F16.padded_columns(n_out) * 2 - n_in * n_out * 2 + n_out * 2
    # bfloat16: the same; in both, where the LM head's kernel keeps a copy of the token table of
    # its own (kernels/formats.py), that copy as well.
    for name in ("float16", "bfloat16"):
        extra_head = head_copy_bytes(models[name].model.lm_head, wte)
        padding = extra if name == "float16" else 0  # no bfloat16 product of this model goes through fbgemm either
        assert models[name].weight_bytes == f32.weight_bytes // 2 + extra_head + padding
    # int8: one byte a weight, but the tied table twice (rows to look up, packed for the head):
    # on this vocabulary-heavy test model ~half of float32 (GPT-2 small: a third, see benchmarks/).
    assert models["int8"].weight_bytes < 0.55 * f32.weight_bytes


def head_copy_bytes(head, wte: torch.Tensor) -> int:
    """What a 16-bit LM head keeps besides the token table: oneDNN's packed copy (unpadded), or
    fbgemm's (padded as its block products, and a float32 bias of zeros), or nothing."""
    vocab, width = wte.shape
    if isinstance(head, packed.PackedLMHead):
        return vocab * width * 2
    if isinstance(head, F16.Float16Linear):
        return F16.padded_rows(width) * F16.padded_columns(vocab) * 2 + vocab * 4
    return 0


@pytest.mark.parametrize("name, max_dlogit, top1", [("bfloat16", 0.2, 0.9), ("float16", 0.02, 1.0), ("int8", 0.5, 0.9)])
def test_each_format_is_close_to_float32(models, name, max_dlogit, top1):
    ids = models["float32"].tokenizer.encode(PROMPT)
    agreement = compare_logits(models[name], models["float32"], ids)
    assert agreement.positions == len(ids)
    assert 0 < agreement.max_abs_dlogit < max_dlogit
    assert agreement.top1_agreement >= top1 and agreement.mean_kl < 1e-2


def test_float32_is_untouched_and_exact(models, ckpts):
    from helpers import hf_logits

    ids = models["float32"].tokenizer.encode(PROMPT)
    ours = models["float32"].model(torch.tensor([ids]))[0]
    torch.testing.assert_close(ours, hf_logits(ckpts.hf("tiny"), ids), rtol=0, atol=1e-4)
    assert compare_logits(models["float32"], models["float32"], ids).max_abs_dlogit == 0


@pytest.mark.parametrize("name", ["float32", "int8"])
def test_a_cached_decode_step_computes_what_a_full_pass_does(models, name):
    """int8 quantizes each position's input on its own, so the prefill's rows and a decode
    step's row go through the very same arithmetic: cached and naive generation agree exactly."""
    lm = models[name]
    cached = lm.generate(PROMPT, 12)
    naive = lm.generate(PROMPT, 12, use_cache=False)
    assert cached.token_ids == naive.token_ids


@pytest.mark.parametrize("name", ["bfloat16", "float16"])
def test_16_bit_cached_and_full_passes_agree_within_rounding(models, name):
    lm = models[name]
    ids = lm.tokenizer.encode(PROMPT)
    full = lm.model(torch.tensor([ids]))[0][0, -1].float()
    cache = lm.model.new_cache()
    lm.model(torch.tensor([ids[:-1]]), cache)
    step = lm.model(torch.tensor([ids[-1:]]), cache)[0][0, -1].float()
    assert (full - step).abs().max() < (0.1 if name == "bfloat16" else 0.02)


def test_int8_products_are_exact_int8_arithmetic():
    """The product must equal the exact product of the quantized operands, on the path this CPU
    takes: 8-bit inputs where fbgemm accumulates in int32 (VNNI), 7-bit inputs where it adds pairs
    of products in a saturating 16-bit sum (AVX2), which 8-bit inputs overflow."""
    levels = I8.int8_input_levels()
    torch.manual_seed(0)
    weight = torch.randn(768, 3072) * 0.05  # [in, out]
    layer = I8.Int8Linear(weight, torch.zeros(3072))
    values, scales = I8.quantize_rows(weight.t())
    for spread in (1.0, 30.0):
        x = torch.randn(1, 768) * spread
        x[0, 5] = 40 * spread  # an outlier, as LayerNorm outputs have
        lo, hi = min(0.0, float(x.min())), max(0.0, float(x.max()))
        step = (hi - lo) / levels
        zero = round(-lo / step)
        x_q = (torch.round(x / step + zero).clamp(0, levels) - zero) * step
        exact = x_q.double() @ (values.double() * scales.double()[:, None]).t()
        got = layer(x).double()
        assert float((got - exact).abs().max() / exact.abs().max()) < 1e-5


@pytest.mark.slow  # the held-out text in three formats (23 s)
@pytest.mark.kernels  # int8 with the AVX2 kernels: 7-bit inputs, another quality
def test_the_bundled_models_quality_on_held_out_text():
    """The first 1,024 held-out tokens (four windows); benchmarks/run.py (bench_heldout) measures the whole text."""
    reference = gpt2viz.load_model("tiny")
    text = (reference.source.path / "heldout.txt").read_text(encoding="utf-8")
    ids = reference.tokenizer.encode(text)[:1024]
    same = heldout(reference, reference, ids[:256])  # one window: a model against itself
    assert same.agreement.max_abs_dlogit == 0 and same.agreement.top1_agreement == 1 and same.perplexity == same.reference_perplexity
    int8 = heldout(gpt2viz.load_model("tiny", dtype="int8"), reference, ids)
    assert int8.predictions == 1020
    assert int8.perplexity / int8.reference_perplexity - 1 < 0.03
    # 8-bit inputs (VNNI) measured 97.8 % top-1 agreement; 7-bit ones (fbgemm's AVX2 kernel) 97.0 %
    # (96.8 % with torch's AVX2 kernels as well), perplexity 0.2 % and 0.4 % above float32's.
    assert int8.agreement.top1_agreement >= (0.96 if I8.int8_inputs_reduced() else 0.97)
    fp16 = heldout(gpt2viz.load_model("tiny", dtype="float16"), reference, ids)
    assert fp16.reference_perplexity == int8.reference_perplexity  # float32 measured the same way twice
    assert abs(fp16.perplexity / fp16.reference_perplexity - 1) < 0.005


SCRIPT = textwrap.dedent(
    """
    import sys, gpt2viz
    lm = gpt2viz.load_model(sys.argv[1], dtype=sys.argv[2])
    status = dict(line.split(":", 1) for line in open("/proc/self/status"))
    print(int(status["RssFile"].split()[0]) // 1024, int(status["VmRSS"].split()[0]) // 1024, lm.weight_bytes // 2**20)
    """
)


@pytest.mark.slow  # gpt2-small's 498 MB loaded in three processes (10 s); the fast tier's
# test_hostile_inputs.py::test_a_checkpoint_rewritten_under_a_loaded_model_changes_nothing guards
# that no mapping of the file is kept
def test_every_format_lets_go_of_the_checkpoints_memory_mapping(ckpts):
    """Every format reads the weights into memory of its own (float32 too: a file rewritten under
    the app must not take its weights away), so its resident memory is what its format stores."""
    path = ckpts.path("gpt2-small")

    def rss(name: str) -> tuple[int, int, int]:
        out = subprocess.run([sys.executable, "-c", SCRIPT, str(path), name], capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        file_mb, total_mb, weights_mb = map(int, out.stdout.split())
        return file_mb, total_mb, weights_mb

    f32_file, f32_total, f32_weights = rss("float32")
    int8_file, int8_total, _ = rss("int8")
    f16_file, f16_total, f16_weights = rss("float16")
    assert f32_file < 150 and int8_file < 150 and f16_file < 150  # the 498 MB file is no longer mapped
    assert int8_total < f32_total - 150  # weights 474 MiB against 158 MiB; heap fragments vary
    # float16: weights 273 MiB, and the copies its kernels keep (the LM head's, where one is
    # faster: 371 MiB in all). The conversion's freed temporaries are given back to the system:
    # what is resident beyond the weights is float32's (measured 252 against 256 MiB; ~140 MiB more
    # when they were not).
    assert f16_total - f16_weights < f32_total - f32_weights + 60


def test_a_trace_in_int8_measures_itself_against_float32(tmp_path, tiny_dir):
    import json

    import trace_schema
    from gpt2viz.trace import dump, load, trace_prompt
    from gpt2viz.tui.narration import narrate
    from gpt2viz.tui.stages import Stage

    lm = gpt2viz.load_model(str(tiny_dir), dtype="int8")
    trace = trace_prompt(lm, PROMPT, quality=True)
    q = trace.quality
    assert q["reference"] == "float32" and q["positions"] == len(trace.tokens)
    want = compare_logits(lm, lm.float32_twin(), lm.tokenizer.encode(PROMPT))
    assert q["top1_agreement"] == want.top1_agreement and q["max_abs_dlogit"] == pytest.approx(want.max_abs_dlogit, rel=1e-5)
    assert trace.model["dtype"] == "int8" and trace.model["compute_dtype"] == "float32"
    assert trace.model["weight_bytes"] == lm.weight_bytes
    path = tmp_path / "t.json"
    dump(trace, path)
    doc = json.loads(path.read_text(encoding="utf-8"))
    trace_schema.validate(doc)
    back = load(path)
    assert back.quality == q
    text = narrate(back, Stage("lm_head"), generate_key="g").text
    assert "stores its weights in int8" in text and f"same at {round(q['top1_agreement'] * q['positions'])} of" in text
    assert trace_prompt(gpt2viz.load_model(str(tiny_dir)), PROMPT, quality=True).quality is None  # float32: nothing to compare
