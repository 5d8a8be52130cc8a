"""What this CPU is and has: the facts that decide which kernels are fast on it.

Two machines of the same model, flags and torch version run the same code paths at about the same
speed, so a kernel choice measured on one holds for the other: `CpuKind.key` names that kind.
torch, oneDNN and fbgemm can be steered to another kind's code paths (an AVX-512 machine running
the AVX2 kernels: `ATEN_CPU_CAPABILITY=avx2`, `ONEDNN_MAX_CPU_ISA=AVX2`,
`FBGEMM_ENABLE_INSTRUCTIONS=AVX2`; MKL by `MKL_ENABLE_INSTRUCTIONS`), so the steering is part of the kind too.
"""

from __future__ import annotations

import functools
import os
import platform
from dataclasses import dataclass
from pathlib import Path

import torch

# The instruction sets that change which kernel is fastest or exact: 256- and 512-bit vectors,
# half-precision conversions, 8-bit and bfloat16 dot products, Intel's matrix tiles.
FLAGS = ("avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "avx512_fp16", "amx_tile")
STEERING = (
    "ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "FBGEMM_ENABLE_INSTRUCTIONS",
    "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR", "MKL_DEBUG_CPU_TYPE",  # MKL's own code paths
)


@dataclass(frozen=True)
class CpuKind:
    model: str  # "AMD EPYC 9B14", "Intel(R) Xeon(R) Processor"
    flags: tuple[str, ...]  # those of FLAGS this CPU has
    capability: str  # the code path torch's own kernels take: "AVX512", "AVX2", "DEFAULT"
    steered: tuple[str, ...]  # "ATEN_CPU_CAPABILITY=avx2", ... where set
    torch: str

    def key(self, threads: int) -> str:
        """One line naming the kind and the thread count: the kernel cache's key."""
        steered = " ".join(self.steered) or "not steered"
        return f"{self.model} | {' '.join(self.flags)} | torch {self.torch} {self.capability} | {steered} | threads {threads}"

    def describe(self) -> str:
        """In one line, names and codes only (a trace shows it in every language): 'Intel(R) Xeon(R)
        Processor; avx2 fma ... amx_tile; torch AVX2; ATEN_CPU_CAPABILITY=avx2'."""
        return "; ".join(part for part in (self.model, " ".join(self.flags), f"torch {self.capability}", " ".join(self.steered)) if part)


def _cpuinfo() -> dict[str, str]:
    """The first processor's lines of /proc/cpuinfo ('model name', 'flags'); empty off Linux."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break  # the first processor is enough: all of a machine's cores are the same kind
        name, _, value = line.partition(":")
        fields[name.strip()] = value.strip()
    return fields


@functools.cache
def this_cpu() -> CpuKind:
    info = _cpuinfo()
    have = set(info.get("flags", "").split())
    return CpuKind(
        model=info.get("model name") or platform.processor() or platform.machine() or "unknown",
        flags=tuple(flag for flag in FLAGS if flag in have),
        capability=torch.backends.cpu.get_cpu_capability(),
        steered=tuple(f"{name}={os.environ[name]}" for name in STEERING if os.environ.get(name)),
        torch=torch.__version__,
    )
