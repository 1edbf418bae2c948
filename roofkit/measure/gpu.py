"""The GPU path, through PyTorch: achievable matmul FLOP/s, copy bandwidth, and the kernel set.

Only runs when PyTorch sees a CUDA (or ROCm) device; otherwise :func:`status`
says so in one line and nothing here is imported. The method is the
"maximum achievable matmul FLOPS" one (stas00/ml-engineering, compute/accelerator):

* a sweep of matrix shapes, because the best tile shape of the library's
  kernels differs by size and the datasheet peak is reached by none of them;
* warm-up iterations before timing (clocks ramp up, libraries pick their
  kernels, memory is allocated);
* the L2 cache flushed before every timed iteration by writing a buffer larger
  than it, so that no iteration finds its inputs already on chip;
* timing with CUDA events recorded on the GPU's own stream around the kernel
  alone (a host timer would add launch latency and synchronisation);
* the median of the timed iterations for each shape; the best shape's rate is
  the achievable peak.

Device-to-device copy bandwidth is the memory roof (a copy reads and writes
every byte: 2 x size counted, as STREAM's copy). Each figure is shown as a %
of the catalog's datasheet figure when the device's name matches an entry.

Then whole bf16 decoder layers of catalog models, op by op and whole, and the
launch figures of a tiny kernel (:mod:`roofkit.measure.layers`): the result,
under ``layers``, has the format of the H200 dataset shipped with roofkit, and
``roofkit layer --calibrated --profile PATH`` is calibrated on it.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import statistics
import sys
from dataclasses import asdict, dataclass, field

from .. import formulas
from ..catalogs.hardware import match_device as match_catalog  # the catalog's lookup, by its name here
from ..perf import roofline
from . import layers as _layers
from .kernels import KernelResult, predict

__all__ = ["status", "match_catalog", "GpuResult", "measure_gpu"]

PRECISIONS = ("bf16", "fp16", "fp8")
# (m, n, k) of the matmul sweep: squares, and two of the flat shapes of a transformer's projections
SHAPES_QUICK = tuple((n, n, n) for n in (2048, 4096, 8192))
SHAPES = tuple((n, n, n) for n in (1024, 2048, 4096, 6144, 8192, 12288)) + ((16384, 8192, 1024), (8192, 16384, 4096))
_TORCH_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp8": "float8_e4m3fn"}


def _driver_present() -> bool:
    """A cheap look for a GPU driver before paying for ``import torch`` (seconds)."""
    system = platform.system()
    if system == "Linux":
        return any(os.path.exists(p) for p in ("/dev/nvidiactl", "/dev/nvidia0", "/proc/driver/nvidia", "/dev/kfd"))
    return system == "Windows"  # no cheap test there: ask PyTorch; macOS has no CUDA


def status() -> tuple[bool, str]:
    """(whether a GPU can be measured, one line saying which, or why not)."""
    try:
        installed = sys.modules.get("torch") is not None or importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        installed = False
    if not installed:
        return False, "GPU: not measured (PyTorch is not installed; the CPU was measured)."
    if not _driver_present():
        return False, "GPU: none found (no CUDA or ROCm driver; the CPU was measured)."
    try:
        import torch  # deferred: torch is optional, and slow to import
    except Exception as error:  # a broken install must not stop the CPU measurement
        return False, f"GPU: not measured (PyTorch failed to import: {type(error).__name__})."
    if not torch.cuda.is_available():
        return False, "GPU: none found (PyTorch sees no CUDA device; the CPU was measured)."
    return True, f"GPU: {torch.cuda.get_device_name(0)}"


@dataclass
class GpuResult:
    name: str
    catalog: str | None  # the matched catalog key
    peak_flops_per_s: dict[str, float]  # precision -> achievable (best shape)
    bandwidth_bytes_per_s: float  # device-to-device copy
    matmul: list[dict] = field(default_factory=list)  # one row per (precision, shape)
    kernels: list[KernelResult] = field(default_factory=list)
    percent_of_datasheet: dict[str, float] = field(default_factory=dict)  # "peak.bf16", "bandwidth" -> %
    notes: list[str] = field(default_factory=list)
    l2_bytes: int | None = None
    layers: dict | None = None  # whole layers, op by op, in the format of roofkit.measure.layers

    def to_dict(self) -> dict:
        data = asdict(self)
        data["kernels"] = [k.to_dict() for k in self.kernels]
        return data


class _Timer:
    """CUDA-event timing of one callable: warm-up, then per-iteration events, L2 flushed before each."""

    def __init__(self, torch, flush):
        self.torch, self.flush = torch, flush

    def median(self, fn, iters: int, warmup: int = 5, flush: bool = True) -> float:
        torch = self.torch
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
        for start, end in events:
            if flush and self.flush is not None:
                self.flush.zero_()  # write a buffer larger than L2: evicts whatever the last iteration left
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
        return statistics.median(start.elapsed_time(end) for start, end in events) / 1e3  # ms -> s


def _matmul_fn(torch, precision: str, m: int, n: int, k: int, device):
    """A callable running one (m, k) @ (k, n) product in ``precision``; raises if unsupported."""
    if precision == "fp8":
        if not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
            raise RuntimeError("this PyTorch has no torch._scaled_mm")
        a = torch.randn(m, k, device=device).to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device=device).to(torch.float8_e4m3fn).t()  # column-major, as _scaled_mm wants
        one = torch.tensor(1.0, device=device)

        def fp8():
            return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

        fp8()  # raises here on a GPU without FP8 tensor cores
        return fp8
    dtype = getattr(torch, _TORCH_DTYPE[precision])
    a, b = torch.randn(m, k, device=device, dtype=dtype), torch.randn(k, n, device=device, dtype=dtype)
    out = torch.empty(m, n, device=device, dtype=dtype)
    return lambda: torch.matmul(a, b, out=out)


def _kernel_fns(torch, kernel: str, where_bytes: float, device):
    """(callable, ideal cost, cost as run, shape) for the GPU kernel set, in BF16."""
    b = 2
    dtype = torch.bfloat16
    if kernel == "add":
        n = max(1024, int(where_bytes / (3 * b)))
        x, y, z = (torch.randn(n, device=device, dtype=dtype) for _ in range(3))
        cost = formulas.elementwise(n, 1, 2, 1, b)
        return (lambda: torch.add(x, y, out=z)), cost, cost, (n,)
    if kernel in ("reduction", "softmax"):
        C = 4096
        R = max(1, int(where_bytes / ((1 if kernel == "reduction" else 2) * b * C)))
        x = torch.randn(R, C, device=device, dtype=dtype)
        if kernel == "reduction":
            cost = formulas.reduction(R, C, b)
            return (lambda: torch.sum(x, dim=1)), cost, cost, (R, C)
        cost = formulas.softmax(R, C, b)  # one fused kernel: the ideal model is what it moves
        return (lambda: torch.softmax(x, dim=-1)), cost, cost, (R, C)
    if kernel == "gemv":
        n = max(64, int((where_bytes / b) ** 0.5) // 64 * 64)
        W, x = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, device=device, dtype=dtype)
        cost = formulas.gemv(n, n, b)
        return (lambda: torch.mv(W, x)), cost, cost, (n, n)
    if kernel == "gemm":
        n = min(8192, max(256, int((where_bytes / (3 * b)) ** 0.5) // 256 * 256))
        fn = _matmul_fn(torch, "bf16", n, n, n, device)
        cost = formulas.gemm(n, n, n, b)
        return fn, cost, cost, (n,)
    raise ValueError(kernel)


def measure_gpu(quick: bool = False, progress=None, device_index: int = 0) -> GpuResult:
    """Measure GPU ``device_index``. Call only when :func:`status` says a GPU is there."""
    import torch  # deferred: torch is optional, and slow to import

    device = torch.device("cuda", device_index)
    torch.cuda.set_device(device)
    props = torch.cuda.get_device_properties(device)
    acc = match_catalog(props.name)
    l2 = int(getattr(props, "L2_cache_size", 0) or (acc.l2_bytes if acc and acc.l2_bytes else 0) or 64 * 2**20)
    free, _total = torch.cuda.mem_get_info(device)
    flush = torch.empty(max(4 * l2, 256 * 2**20), dtype=torch.int8, device=device)
    timer = _Timer(torch, flush)
    iters = 10 if quick else 30
    notes = [] if acc else [f"no catalog entry matches {props.name!r}: no % of datasheet"]
    tick = progress or (lambda: None)

    # 1. achievable matmul FLOP/s: a sweep of shapes in each precision
    shapes = SHAPES_QUICK if quick else SHAPES
    matmul, peaks = [], {}
    for precision in PRECISIONS:
        for m, n, k in shapes:
            try:
                fn = _matmul_fn(torch, precision, m, n, k, device)
            except (RuntimeError, TypeError, AttributeError) as error:
                notes.append(f"{precision}: not measured ({str(error).splitlines()[0][:120]})")
                break
            seconds = timer.median(fn, iters)
            rate = float(formulas.gemm(m, n, k, precision).flops) / seconds
            matmul.append({"precision": precision, "m": m, "n": n, "k": k, "time_s": seconds, "flops_per_s": rate})
            peaks[precision] = max(peaks.get(precision, 0.0), rate)
            del fn
            tick()
        torch.cuda.empty_cache()

    # 2. device-to-device copy: read and write every byte, arrays far larger than L2
    size = int(min(2**30 if quick else 4 * 2**30, free / 4))
    src, dst = torch.empty(size, dtype=torch.uint8, device=device), torch.empty(size, dtype=torch.uint8, device=device)
    src.fill_(1)
    bandwidth = 2 * size / timer.median(lambda: dst.copy_(src), iters, flush=False)
    del src, dst
    tick()

    # 3. the kernel set, in BF16, predicted from the measured roofs
    P = peaks.get("bf16") or max(peaks.values())
    places = {"L2": l2 / 2, "HBM": min(max(64 * l2, 2**31), free / 8)}
    kernels = []
    for kernel in ("add", "reduction", "gemv", "gemm", "softmax"):
        for where, nbytes in places.items():
            fn, ideal, moved, shape = _kernel_fns(torch, kernel, nbytes, device)
            seconds = timer.median(fn, iters, flush=(where != "L2"))  # in L2: no flush, to show the cache
            F, Q = float(moved.flops), float(moved.bytes)
            kernels.append(KernelResult(kernel, where, tuple(shape), "bf16", F, float(ideal.bytes), Q,
                                        float(ideal.bytes), seconds, predict(F, Q, P, bandwidth),
                                        roofline.bound(F / Q, P, bandwidth)))
            del fn
            tick()

    # 4. whole decoder layers, op by op and whole, and the launch figures (the per-kernel floor); then layers as
    #    training runs them, forward and forward plus backward
    layer_data, layer_notes = _layers.measure_layers(torch, timer, device, quick, tick,
                                                     free_bytes=torch.cuda.mem_get_info(device)[0])
    training, training_notes = _layers.measure_training(torch, timer, device, quick, tick,
                                                        free_bytes=torch.cuda.mem_get_info(device)[0])
    if training:  # forward and backward, beside the inference layers: what calibrates the training step
        layer_data["training"] = training
    layer_notes += training_notes
    layer_data["roofs"] = {"peak_flops_per_s": dict(peaks), "bandwidth_bytes_per_s": bandwidth}
    if acc:
        layer_data["catalog"] = acc.key
    notes += layer_notes
    del flush
    torch.cuda.empty_cache()

    percent = {}
    if acc:
        for precision, rate in peaks.items():
            if precision in acc.peak_flops:
                percent[f"peak.{precision}"] = 100 * rate / acc.peak(precision)
        percent["bandwidth"] = 100 * bandwidth / acc.bandwidth
        if "bf16" in acc.peak_flops:
            for k in kernels:
                percent[f"kernel.{k.label}"] = float(roofline.percent_of_roofline(
                    k.achieved_flops_per_s, k.intensity, acc.peak("bf16"), acc.bandwidth))
    return GpuResult(name=props.name, catalog=acc.key if acc else None, peak_flops_per_s=peaks,
                     bandwidth_bytes_per_s=bandwidth, matmul=matmul, kernels=kernels,
                     percent_of_datasheet=percent, notes=notes, l2_bytes=l2, layers=layer_data)


def steps(quick: bool) -> int:
    """How many progress ticks :func:`measure_gpu` makes (for the progress bar's total)."""
    return len(PRECISIONS) * len(SHAPES_QUICK if quick else SHAPES) + 1 + 5 * 2 + _layers.steps(quick)
