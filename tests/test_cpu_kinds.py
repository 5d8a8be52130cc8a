"""The kernels of the other x86 CPU kind, on this machine: fbgemm's AVX2 kernels (the ones a CPU
without AVX-512 VNNI runs) are picked on any x86 CPU by FBGEMM_ENABLE_INSTRUCTIONS=AVX2, read once
per process, so each check runs in a fresh one. CI also runs every kernel test under that setting
and torch's and oneDNN's own (README: the kernels tier)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

PROBE = textwrap.dedent(
    """
    import torch
    from gpt2viz.kernels import fbgemm_float16 as F16
    from gpt2viz.kernels import int8 as P

    print(P.int8_inputs_reduced(), F16.rows_independent())
    largest = P.Int8Linear(torch.ones(768, 8), torch.zeros(8))(torch.ones(1, 768))  # 255 x 127, 768 times
    print(float(largest.max()))
    torch.manual_seed(0)
    layer = F16.Float16Linear(torch.randn(768, 3072) * 0.05, torch.randn(3072))
    x = (torch.randn(16, 768) * 3).to(torch.float16)
    print(torch.equal(layer(x), torch.cat([layer(row) for row in x.split(1)])))
    """
)


def run_probe(**env: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env={**os.environ, **env}, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_fbgemms_avx2_kernels_are_measured_and_kept_exact():
    """On the AVX2 kernels 8-bit int8 inputs saturate (a product of the largest values gives 389,
    not 768) and float16 rows are not independent of the rows beside them: both are measured, so
    the int8 inputs get 7 bits (768 exactly) and float16 products go one row at a time (a decode
    step's digits are a full pass's)."""
    reduced, independent, largest, same = run_probe(FBGEMM_ENABLE_INSTRUCTIONS="AVX2")
    assert (reduced, independent) == ("True", "False")
    assert abs(float(largest) - 768) < 1e-3 and same == "True"
