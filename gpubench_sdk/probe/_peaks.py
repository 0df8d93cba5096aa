"""Published peak figures of common data-centre GPUs, to compare a measurement against.

Dense figures: NVIDIA's datasheets quote tensor-core throughput "with sparsity" (2:4
structured sparsity doubles it); a dense matmul can reach at most half of that, so each
dense figure below is the datasheet's sparse figure / 2 where the datasheet marks it so.
``fp32`` is the CUDA-core FP32 figure (what an fp32 matmul gets with TF32 off). Peaks are at
boost clock; sustained clocks under load are lower, so well under 100% of peak is normal
(an H200 has measured ~790 of 989 TFLOP/s bf16 on an 8192^3 matmul: issue 9's reference).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """One GPU model's published peaks. ``None`` marks a dtype the model has no tensor path for."""

    model: str
    pattern: str  # regex matched, case-insensitively, against the driver's device name
    memory_gib: float  # advertised memory (GB in the datasheet, taken as GiB-ish: a label)
    memory_bandwidth_gb_per_s: float
    peak_tflop_per_s: dict[str, float | None]
    sm_count: int | None  # streaming multiprocessors of the full part (MIG slices show fewer)
    source: str
    note: str = ""
    min_memory_gib: float = 0.0  # tells the 40 GB and 80 GB A100 apart when the name does not
    aliases: tuple[str, ...] = field(default=())


_H100_SXM = "https://www.nvidia.com/en-us/data-center/h100/ (H100 datasheet, SXM column)"
_H100_PCIE = "https://www.nvidia.com/en-us/data-center/h100/ (H100 datasheet, PCIe column)"
_H200 = "https://www.nvidia.com/en-us/data-center/h200/ (H200 datasheet, SXM column)"
_A100 = (
    "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
    "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"
)
_L4 = "https://www.nvidia.com/en-us/data-center/l4/ (L4 datasheet)"
_L40S = "https://www.nvidia.com/en-us/data-center/l40s/ (L40S datasheet)"
_A10 = "https://www.nvidia.com/en-us/data-center/products/a10-gpu/ (A10 datasheet)"
_T4 = (
    "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/"
    "t4-tensor-core-datasheet-951643.pdf"
)
_ADA = (
    "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf"
    " (Ada architecture whitepaper, appendix A, GeForce RTX 4090)"
)
_B200 = "https://www.nvidia.com/en-us/data-center/hgx/ (HGX B200 datasheet; 8-GPU figures / 8)"
_HALF_SPARSE = "tf32/fp16/bf16/fp8: the datasheet's 'with sparsity' figure / 2"

SPECS: tuple[GpuSpec, ...] = (
    GpuSpec("H200 SXM", r"\bH200\b(?!.*\bNVL\b)", 141, 4800,
            {"fp32": 67, "tf32": 494.5, "fp16": 989.5, "bf16": 989.5, "fp8": 1979},
            132, _H200, _HALF_SPARSE),
    GpuSpec("H100 PCIe", r"\bH100\b.*\bPCIe\b", 80, 2000,
            {"fp32": 51, "tf32": 378, "fp16": 756.5, "bf16": 756.5, "fp8": 1513},
            114, _H100_PCIE, _HALF_SPARSE),
    GpuSpec("H100 SXM", r"\bH100\b(?!.*\b(PCIe|NVL)\b)", 80, 3350,
            {"fp32": 67, "tf32": 494.5, "fp16": 989.5, "bf16": 989.5, "fp8": 1979},
            132, _H100_SXM, _HALF_SPARSE),
    GpuSpec("A100 80GB PCIe", r"\bA100\b.*\bPCIe\b", 80, 1935,
            {"fp32": 19.5, "tf32": 156, "fp16": 312, "bf16": 312, "fp8": None},
            108, _A100, "dense figures as printed (the datasheet gives sparse ones apart)",
            min_memory_gib=60),
    GpuSpec("A100 80GB SXM", r"\bA100\b", 80, 2039,
            {"fp32": 19.5, "tf32": 156, "fp16": 312, "bf16": 312, "fp8": None},
            108, _A100, "dense figures as printed (the datasheet gives sparse ones apart)",
            min_memory_gib=60),
    GpuSpec("A100 40GB", r"\bA100\b", 40, 1555,
            {"fp32": 19.5, "tf32": 156, "fp16": 312, "bf16": 312, "fp8": None},
            108, _A100, "dense figures as printed; 1,555 GB/s for both the SXM and PCIe 40GB"),
    GpuSpec("L40S", r"\bL40S\b", 48, 864,
            {"fp32": 91.6, "tf32": 183, "fp16": 366.5, "bf16": 366.5, "fp8": 733},
            142, _L40S, _HALF_SPARSE),
    GpuSpec("L4", r"\bL4\b", 24, 300,
            {"fp32": 30.3, "tf32": 60, "fp16": 121, "bf16": 121, "fp8": 242.5},
            58, _L4, _HALF_SPARSE),
    GpuSpec("A10G", r"\bA10G\b", 24, 600,
            {"fp32": 31.2, "tf32": 62.5, "fp16": 125, "bf16": 125, "fp8": None},
            None, _A10,
            "AWS's A10G has no NVIDIA datasheet: these are the A10's dense figures, an"
            " approximation (the A10G's clocks and SM count differ)"),
    GpuSpec("A10", r"\bA10\b", 24, 600,
            {"fp32": 31.2, "tf32": 62.5, "fp16": 125, "bf16": 125, "fp8": None},
            72, _A10, "dense figures as printed"),
    GpuSpec("T4", r"\bT4\b", 16, 320,
            {"fp32": 8.1, "tf32": None, "fp16": 65, "bf16": None, "fp8": None},
            40, _T4, "fp16 is the datasheet's mixed-precision (FP16/FP32) tensor figure"),
    GpuSpec("RTX 4090", r"\bRTX 4090\b", 24, 1008,
            {"fp32": 82.6, "tf32": 82.6, "fp16": 165.2, "bf16": 165.2, "fp8": 330.3},
            128, _ADA,
            "dense figures with FP32 accumulate (what torch's fp16/bf16 matmul uses; GeForce"
            " runs FP16-accumulate at twice that)"),
    GpuSpec("B200", r"\bB200\b", 180, 8000,
            {"fp32": 75, "tf32": 1125, "fp16": 2250, "bf16": 2250, "fp8": 4500},
            148, _B200, _HALF_SPARSE + "; per GPU = the 8-GPU HGX figure / 8"),
)  # fmt: skip


def spec_for(device_name: str, memory_bytes: int | None = None) -> GpuSpec | None:
    """The published spec matching a device name (``torch.cuda.get_device_name``), if known.

    A MIG slice ("NVIDIA A100-SXM4-40GB MIG 1g.5gb") matches its parent model; scale its
    peaks with ``sm_fraction``. Unknown models (and CPUs) give ``None``: no peak to compare.
    """
    name = device_name.replace("-", " ").replace("_", " ")
    memory_gib = None if memory_bytes is None else memory_bytes / 2**30
    mig = re.search(r"\bMIG\b", name, re.IGNORECASE) is not None
    for spec in SPECS:
        if not re.search(spec.pattern, name, re.IGNORECASE):
            continue
        if spec.min_memory_gib:
            says_80 = re.search(r"\b80 ?GB\b", name, re.IGNORECASE) is not None
            big = says_80 or (not mig and memory_gib is not None and memory_gib >= 60)
            if not big:
                continue
        return spec
    return None


def sm_fraction(spec: GpuSpec, visible_sm_count: int | None) -> float:
    """The share of the full part's SMs this process can use (1.0 when unknown or whole)."""
    if spec.sm_count is None or not visible_sm_count or visible_sm_count >= spec.sm_count:
        return 1.0
    return visible_sm_count / spec.sm_count
