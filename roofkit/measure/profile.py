"""A measured machine: its roofs, its kernels and its prediction table, saved as JSON, loaded as a catalog entry.

    >>> p = Profile(host="lab-pc", date="2026-11-03", cpu="Example CPU", vendor="Example", threads=4,
    ...             quick=True, llc_bytes=32 * 2**20, l2_bytes=2**20, cache_source="sysfs",
    ...             peak_flops_per_s={"fp64": 1e11, "fp32": 2e11}, bandwidth_bytes_per_s=2e10)
    >>> entry = p.entry()
    >>> entry["source"], entry["peak_tflops"], entry["bandwidth_tb_s"]
    ('measured on lab-pc 2026-11-03 by roofkit measure', {'fp64': 0.1, 'fp32': 0.2}, 0.02)
    >>> round(p.accelerator().ridge("fp32"), 3)
    10.0

:func:`load_profile` reads a saved profile and registers it in the catalog
(:func:`roofkit.hardware.register`), so that ``roofkit.hw("my-machine")`` and
every function that takes an accelerator name work with it, beside the H100.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..catalogs import hardware
from ..perf import roofline
from ..errors import InvalidValue
from ..plots.measure import profile_plot
from ..units import positive
from . import sanity
from .kernels import KernelResult, format_table, prediction_table

__all__ = ["Profile", "load_profile", "FORMAT"]

FORMAT = 1  # the profile file's version


@dataclass
class Profile:
    """Everything ``roofkit measure`` found. Rates in FLOP/s and bytes/s, sizes in bytes, times in s."""

    host: str
    date: str
    cpu: str
    vendor: str
    threads: int
    quick: bool
    llc_bytes: int
    l2_bytes: int
    cache_source: str
    peak_flops_per_s: dict[str, float]  # precision -> best matmul rate
    bandwidth_bytes_per_s: float  # the best of STREAM's copy, scale, add and triad
    bandwidth_kernel: str = "triad"  # the one that reached it
    array_note: str = ""
    stream: dict[str, dict] = field(default_factory=dict)
    matmul: list[dict] = field(default_factory=list)
    kernels: list[KernelResult] = field(default_factory=list)
    fusion: dict | None = None
    gpu: dict | None = None
    gpu_status: str = "GPU: not looked for."
    elapsed_s: float | None = None
    remeasured: list[str] = field(default_factory=list)  # the groups timed again after a failed check

    @property
    def sane(self) -> bool:
        """Whether every check of :mod:`roofkit.measure.sanity` passes on this profile's numbers."""
        return not sanity.failed(self.sanity())

    def sanity(self) -> list:
        """The checks of :mod:`roofkit.measure.sanity`, run on this profile's numbers."""
        return sanity.check(self)

    # --- roofs -----------------------------------------------------------------

    @property
    def source(self) -> str:
        return f"measured on {self.host} {self.date} by roofkit measure"

    def ridge(self, precision: str = "fp32") -> float:
        return roofline.ridge_point(self.peak_flops_per_s[precision], self.bandwidth_bytes_per_s)

    def entry(self, device: str = "cpu") -> dict:
        """The catalog entry (the TOML table format of data/hardware.toml) for the CPU or the GPU."""
        if device == "cpu":
            return {
                "name": f"{self.host} CPU (measured)",
                "vendor": self.vendor,
                "source": self.source,
                "peak_tflops": {p: v / 1e12 for p, v in self.peak_flops_per_s.items()},
                "bandwidth_tb_s": self.bandwidth_bytes_per_s / 1e12,
                **({"l2_mb": self.llc_bytes / 1e6} if self.llc_bytes else {}),  # 0: the cache was not found
                "compute_units": self.threads,
                "compute_unit_name": "thread",
                "notes": [f"{self.cpu}; {self.threads} threads; last-level cache from {self.cache_source}",
                          "peaks: best rate of a numpy/BLAS matmul sweep; bandwidth: best STREAM loop "
                          f"({self.bandwidth_kernel}), best of runs"
                          + (f", arrays {self.array_note}" if self.array_note else ""),
                          *(["quick mode: fewer sizes and runs"] if self.quick else [])],
            }
        if device == "gpu":
            if not self.gpu:
                raise InvalidValue(f"this profile has no GPU measurement ({self.gpu_status}); use device='cpu'.")
            g = self.gpu
            return {
                "name": f"{g['name']} on {self.host} (measured)",
                "vendor": g["name"].split()[0] if g["name"] else "unknown",
                "source": self.source,
                "peak_tflops": {p: v / 1e12 for p, v in g["peak_flops_per_s"].items()},
                "bandwidth_tb_s": g["bandwidth_bytes_per_s"] / 1e12,
                **({"l2_mb": g["l2_bytes"] / 1e6} if g.get("l2_bytes") else {}),
                "notes": ["peaks: achievable matmul (shape sweep, L2 flushed, CUDA events, median); "
                          "bandwidth: device-to-device copy"],
            }
        raise InvalidValue(f"Unknown device {device!r}. Expected one of: cpu, gpu.")

    def accelerator(self, device: str = "cpu", key: str | None = None) -> hardware.Accelerator:
        """The profile as an Accelerator, without registering it (roofline.plot takes it directly)."""
        e = self.entry(device)
        return hardware.Accelerator(
            key=key or ("my-machine" if device == "cpu" else "my-gpu"), name=e["name"], vendor=e["vendor"],
            peak_flops={p: t * 1e12 for p, t in e["peak_tflops"].items()}, bandwidth=e["bandwidth_tb_s"] * 1e12,
            l2_bytes=e["l2_mb"] * 1e6 if "l2_mb" in e else None, compute_units=e.get("compute_units"),
            compute_unit_name=e.get("compute_unit_name", "SM"), sources={"*": e["source"]}, notes=tuple(e["notes"]))

    # --- the table and the plot --------------------------------------------------------------

    def table(self) -> list[dict]:
        """The prediction table: one row per kernel (see roofkit.measure.kernels.prediction_table)."""
        return prediction_table(self.kernels)

    def outside_caches(self, factor: float = 4) -> list[KernelResult]:
        """The kernels whose working set is at least ``factor`` x the last-level cache."""
        return [k for k in self.kernels if k.working_set >= factor * self.llc_bytes]

    def median_error(self, factor: float = 4) -> float | None:
        """Median |error| of the kernels well outside the caches (None if there are none)."""
        errors = [abs(k.error) for k in self.outside_caches(factor)]
        return statistics.median(errors) if errors else None

    def plot(self, beside=(), kernels: list[KernelResult] | None = None, precisions=("fp32", "fp64"), title=None):
        """The measured roofline with the measured kernels on it; ``beside`` adds catalog accelerators.

        See :func:`roofkit.measure.plot.profile_plot`.
        """
        return profile_plot(self, beside, kernels, precisions, title)

    # --- text and JSON ------------------------------------------------------------------------

    def report(self) -> str:
        """A readable summary: roofs, STREAM, the prediction table, fusion, the GPU line."""
        lines = [f"{self.host}: {self.cpu}, {self.threads} thread{'s' * (self.threads != 1)}, last-level cache "
                 f"{self.llc_bytes / 2**20:.4g} MiB ({self.cache_source})" + (" [quick]" if self.quick else "")]
        for p, v in self.peak_flops_per_s.items():
            lines.append(f"peak {p} (matmul)    {human(v, 'FLOP/s'):>14}   ridge {self.ridge(p):.3g} FLOP/byte")
        lines.append(f"bandwidth (STREAM)   {human(self.bandwidth_bytes_per_s, 'B/s'):>14}   "
                     f"the best of copy, scale, add, triad: {self.bandwidth_kernel}")
        if self.stream:
            lines.append(f"STREAM, arrays of {next(iter(self.stream.values()))['n']:,} doubles ({self.array_note}):")
            for name, s in self.stream.items():
                lines.append(f"  {name:<12} {s['arrays']:g} arrays  {human(s['bandwidth_bytes_per_s'], 'B/s'):>12}"
                             f"   {s['loop']}")
        if self.kernels:
            lines += ["", "prediction table (roofline from the measured roofs vs measured time):",
                      format_table(self.table())]
            median = self.median_error()
            if median is not None:
                lines.append(f"median |error| of the kernels outside the caches: {median:.0%}")
        if self.fusion:
            f = self.fusion
            ms = lambda t: f"{t * 1e3:8.3g} ms"  # noqa: E731
            lines += ["", f"fusion: y = (x*q + bias)*g + r ({' -> '.join(f['ops'])}) on {f['n']:,} FP32 elements",
                      f"  bytes: unfused {human(f['bytes_unfused'], 'B')}, fused {human(f['bytes_fused'], 'B')} "
                      f"({f['traffic_ratio']:.3g}x less); predicted speed-up {f['predicted_speedup']:.3g}x",
                      f"  numpy, one temporary per op     {ms(f['unfused_s'])}",
                      f"  numexpr (fused)                 {ms(f['fused_s'])}   {f['unfused_s'] / f['fused_s']:.3g}x",
                      f"  numpy in cache-sized blocks     {ms(f['blocked_s'])}   {f['unfused_s'] / f['blocked_s']:.3g}x",
                      f"  numpy as one expression         {ms(f['expression_s'])}   "
                      f"{f['unfused_s'] / f['expression_s']:.3g}x (fresh temporaries)"]

        lines += ["", sanity.report(self.sanity(), self.remeasured)]
        lines += ["", self.gpu_status]
        if self.gpu:
            g = self.gpu
            for p, v in g["peak_flops_per_s"].items():
                pct = g["percent_of_datasheet"].get(f"peak.{p}")
                lines.append(f"  {p} matmul {human(v, 'FLOP/s')}" + (f" ({pct:.0f}% of datasheet)" if pct else ""))
            pct = g["percent_of_datasheet"].get("bandwidth")
            lines.append(f"  copy {human(g['bandwidth_bytes_per_s'], 'B/s')}" + (f" ({pct:.0f}% of datasheet)" if pct else ""))
            gpu_kernels = [KernelResult.from_dict(k) for k in g["kernels"]]
            if gpu_kernels:
                lines += ["  prediction table (BF16, from the measured GPU roofs):",
                          *("  " + line for line in format_table(prediction_table(gpu_kernels)).splitlines())]
                shares = [f"{k.label} {g['percent_of_datasheet'][f'kernel.{k.label}']:.0f}%" for k in gpu_kernels
                          if f"kernel.{k.label}" in g["percent_of_datasheet"]]
                if shares:
                    lines.append("  % of the datasheet roofline: " + ", ".join(shares))
            if g.get("layers"):
                layers, launch = g["layers"], g["layers"].get("launch", {})
                lines.append(f"  layers: {len(layers['cases'])} bf16 decoder layers timed op by op and whole; "
                             f"a tiny kernel takes {launch.get('single_kernel_event_s', 0) * 1e6:.3g} µs alone, "
                             f"{launch.get('graph_per_kernel_s', 0) * 1e6:.3g} µs in a CUDA graph")
                lines.append("  predict with them: roofkit layer --calibrated --profile PATH (the saved profile)")
            lines += [f"  note: {n}" for n in g["notes"]]
        if self.elapsed_s is not None:
            lines.append(f"measured in {self.elapsed_s:.1f} s")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        data = asdict(self)
        data["kernels"] = [k.to_dict() for k in self.kernels]
        return {"roofkit_profile": FORMAT, **data,
                "ridge": {p: self.ridge(p) for p in self.peak_flops_per_s},
                "prediction_table": self.table(), "median_error_outside_caches": self.median_error(),
                "sane": self.sane, "checks": [c.to_dict() for c in self.sanity()],
                "catalog_entry": self.entry("cpu")}

    @classmethod
    def from_dict(cls, data: dict) -> "Profile":
        if not isinstance(data, dict) or data.get("roofkit_profile") != FORMAT:
            raise InvalidValue("not a roofkit profile (expected a JSON object with \"roofkit_profile\": 1, "
                               "as written by `roofkit measure --save PATH`).")
        names = set(cls.__dataclass_fields__)
        missing = {"host", "date", "peak_flops_per_s", "bandwidth_bytes_per_s"} - set(data)
        if missing:
            raise InvalidValue(f"the profile lacks {', '.join(sorted(missing))}.")
        peaks, kernels, gpu = data["peak_flops_per_s"], data.get("kernels", []), data.get("gpu")
        if not isinstance(peaks, dict) or not peaks:
            raise InvalidValue("the profile's peak_flops_per_s must map precisions to FLOP/s, e.g. {\"fp64\": 1e11}.")
        for precision, value in peaks.items():
            positive(value, f"peak_flops_per_s[{precision!r}]")
        positive(data["bandwidth_bytes_per_s"], "bandwidth_bytes_per_s")
        if not isinstance(kernels, list) or (gpu is not None and not isinstance(gpu, dict)):
            raise InvalidValue("the profile's kernels must be a list and its gpu an object, as `roofkit measure` "
                               "writes them.")
        fields = {k: v for k, v in data.items() if k in names}
        try:
            fields["kernels"] = [KernelResult.from_dict(k) for k in kernels]
        except (KeyError, TypeError, ValueError, AttributeError):
            raise InvalidValue("a kernel in the profile is not what `roofkit measure` writes "
                               f"(each needs {', '.join(KernelResult.__dataclass_fields__)}).") from None
        defaults = {"cpu": "unknown CPU", "vendor": "unknown", "threads": 1, "quick": False,
                    "llc_bytes": 0, "l2_bytes": 0, "cache_source": "unknown"}
        return cls(**(defaults | fields))

    def save(self, path: str | Path) -> Path:
        """Write the profile as JSON (UTF-8); returns the path."""
        path = Path(path)
        try:
            path.write_text(json.dumps(self.to_dict(), indent=2, default=_plain) + "\n", encoding="utf-8")
        except OSError as error:
            raise InvalidValue(f"cannot write the profile to {str(path)!r}: {error.strerror or error}.") from None
        return path


def human(value: float, unit: str) -> str:
    """2.5e10, 'B/s' -> '25 GB/s'."""
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.4g} {prefix}{unit}"
    return f"{value:.4g} {unit}"


def _plain(value):
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return str(value)


def load_profile(source, key: str | None = None, device: str = "cpu", replace: bool = True) -> hardware.Accelerator:
    """Register a measured machine in the catalog and return it.

    ``source`` is a path to a JSON file saved by ``roofkit measure --save``, a
    :class:`Profile`, or its dict. The entry's key is ``key`` (default
    "my-machine" for the CPU, "my-gpu" for the GPU); ``replace=True`` lets a
    new measurement take the place of an older one under the same key.
    """
    if isinstance(source, Profile):
        profile = source
    elif isinstance(source, dict):
        profile = Profile.from_dict(source)
    else:
        path = Path(source)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise InvalidValue(f"No profile at {str(path)!r}; write one with `roofkit measure --save {path}`.") from None
        except json.JSONDecodeError as error:
            raise InvalidValue(f"{str(path)!r} is not valid JSON: {error}.") from None
        profile = Profile.from_dict(data)
    key = key or ("my-machine" if device == "cpu" else "my-gpu")
    return hardware.register(profile.entry(device), key=key, replace=replace)
