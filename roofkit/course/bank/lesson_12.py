"""Lesson 12, measure your machine: STREAM's byte counts and array sizes, predictions against measurements, fusion.

Every key is about the method, with the lesson's own numbers as parameters, so
that it is the same on every machine: a learner's measured figures are shown
in the notebook but never checked.
"""

from __future__ import annotations

from ... import formulas
from ...perf import fusion, roofline
from ...catalogs import hardware
from ...measure import kernels, prediction_error, predict, stream
from ...measure.fused import CHAIN
from ..quiz import Misconception, Question, register

_MIB = 2**20


def _array_elements(llc_mib, factor):
    return stream.array_elements(llc_mib * _MIB, 8, factor)[0]


def _add(n):
    """z = x + y over n FP32 elements: 1 FLOP, 2 reads and 1 write per element."""
    return formulas.elementwise(n, 1, 2, 1, "fp32")


def _predict_ms(cost, peak_gflops, bandwidth_gbs):
    return predict(cost.flops, cost.bytes, peak_gflops * 1e9, bandwidth_gbs * 1e9) * 1e3


def _machine(peak_gflops, bandwidth_gbs):
    """A measured machine as an Accelerator (not registered in the catalog)."""
    return hardware.Accelerator(key="example", name="example machine", vendor="-",
                                peak_flops={"fp32": peak_gflops * 1e9}, bandwidth=bandwidth_gbs * 1e9)


def _where(n, l2_mib, llc_mib, arrays=3):
    """Where the working set of ``arrays`` FP32 arrays of n elements fits."""
    return kernels.where(formulas.elementwise(n, 0, arrays, 0, "fp32").bytes, l2_mib * _MIB, llc_mib * _MIB)


def _unless_key(wrong):
    """A wrong placement as a misconception, unless a variant's numbers make it the right one."""
    return lambda **p: None if wrong(**p) == _where(**p) else wrong(**p)


_LEVELS = ("L2", "LLC", ">LLC", "DRAM")


def _other_level(level):
    """``level`` as a wrong placement, unless it is the key or the one-array or bigger-is-enough slip's."""
    def value(n, l2_mib, llc_mib):
        key = _where(n, l2_mib, llc_mib)
        named = (key, _where(n, l2_mib, llc_mib, arrays=1), "DRAM" if key == ">LLC" else "LLC")
        return None if level in named else level
    return value


def _ridge(hw, peak_achievable=True, bandwidth_achievable=True):
    acc = hardware.get(hw)
    return acc.peak("bf16", achievable=peak_achievable) / acc.memory_bandwidth(achievable=bandwidth_achievable)


def _crossing(d, hw):
    """The smallest M at which an M x d x d BF16 GEMM is compute-bound on ``hw``'s datasheet roofline."""
    return roofline.decode_batch_to_compute_bound(d, hw, "bf16")


def _measured_crossing(d, hw):
    """The same crossing at the measured (achievable) ridge, where the catalog has one; else None."""
    acc = hardware.get(hw)
    if not (acc.has_achievable("bf16") and acc.has_achievable("bandwidth")):
        return None
    crossing = roofline.crossing_size(lambda m: formulas.gemm(m, d, d, "bf16").intensity, _ridge(hw))
    ridge = acc.ridge("bf16")
    return None if abs(crossing - ridge) < 1 else crossing  # the same whole number as 'intensity = batch'


def _softmax_ratio(rows, cols, write_allocate=True, ideal_write_allocate=None):
    """numpy's softmax traffic over the one-kernel softmax's, both counted with (or without) write-allocate."""
    ideal_wa = write_allocate if ideal_write_allocate is None else ideal_write_allocate
    return (kernels.softmax_numpy_cost(rows, cols, 4, write_allocate).bytes
            / kernels.traffic(kernels.SOFTMAX_IDEAL_PASSES, rows * cols, 4, ideal_wa))


def _fusion_speedup(n, bandwidth_gbs, peak_gflops):
    return fusion.chain(list(CHAIN), n, "fp32").time(_machine(peak_gflops, bandwidth_gbs), "fp32",
                                                     launch_overhead_s=0)["speedup"]


register(
    Question(
        id="l12.stream-array",
        lesson="12",
        kind="numeric",
        prompt=("A CPU's last-level cache holds {llc_mib} MiB. STREAM's rule: each array must be at least {factor} "
                "times the size of the caches, or the bandwidth you measure is the cache's. At least how many "
                "float64 elements must each array hold?"),
        params={"llc_mib": 32, "factor": 4},
        key=_array_elements,
        unit="dimensionless",
        rtol=0,  # one exact whole number
        hints=("First the size in bytes: the cache times the factor. A MiB is 2**20 bytes.",
               "Then elements: a float64 takes 8 bytes."),
        misconceptions=(
            Misconception("bytes-not-elements", "That is the size in bytes. Divide by the 8 bytes of a float64 to "
                                                "count elements.", scale=8),
            Misconception("no-factor", "That array would only just fill the cache, and part of it would be "
                                       "served from there. STREAM asks for several times the cache.",
                          answer=lambda llc_mib, factor: _array_elements(llc_mib, 1)),
            Misconception("mb-not-mib", "You used 10**6 bytes per MB. Cache sizes are binary: a MiB is 2**20 bytes.",
                          answer=lambda llc_mib, factor: factor * llc_mib * 1e6 / 8),
        ),
        variants={"llc_mib": (8, 16, 32, 36, 64, 96), "factor": (4,)},
    ),
    Question(
        id="l12.triad-bytes",
        lesson="12",
        kind="numeric",
        prompt=("STREAM's triad computes a = b + q*c over n = {n} float64 elements. How many bytes does STREAM "
                "count as moved by one run?"),
        params={"n": 2**24},
        key=lambda n: stream.stream_bytes("triad", n, 8),
        unit="byte",
        rtol=0.01,
        hints=("Which arrays are read, and which are written? q is a single number.",
               "Count each array of n elements that crosses memory once, times 8 bytes."),
        misconceptions=(
            Misconception("reads-only", "You counted the reads of b and c but not the write of a: the result "
                                        "crosses memory too.", scale=2 / 3),
            Misconception("write-allocate", "That counts the read of a's cache lines before they are written "
                                            "(write-allocate). It is real on most CPUs, but STREAM's convention "
                                            "leaves it out: count each array once.", scale=4 / 3),
            Misconception("bits-not-bytes", "That is 8x too many: you counted bits. A float64 is 8 bytes.", scale=8),
        ),
        variants={"n": (2**23, 2**24, 2**25, 10**7, 3 * 10**7)},
    ),
    Question(
        id="l12.triad-numpy-bytes",
        lesson="12",
        kind="numeric",
        prompt=("Written as np.add(b, q * c, out=a), the triad first computes t = q * c into a new array of n "
                "elements, then adds b. For n = {n} float64 elements and arrays far larger than the caches, how "
                "many bytes cross memory in one run?"),
        params={"n": 2**24},
        key=lambda n: stream.stream_bytes("triad_numpy", n, 8),
        unit="byte",
        rtol=0.01,
        hints=("Two numpy calls, two passes over memory. Count each one on its own.",
               "The multiply reads c and writes t; the add reads b and t and writes a.",
               "t is far too big to stay in the cache: it is written to memory and read back."),
        misconceptions=(
            Misconception("stream-count", "That is STREAM's count, for a triad done in one pass. numpy's temporary "
                                          "t goes to memory and comes back: count it.", scale=3 / 5),
            Misconception("temporary-once", "You counted t once. It crosses memory twice: written by the "
                                            "multiply, read back by the add.", scale=4 / 5),
        ),
        variants={"n": (2**23, 2**24, 2**25, 10**7)},
    ),
    Question(
        id="l12.prediction-error",
        lesson="12",
        kind="numeric",
        prompt=("From the measured roofs the roofline predicts {predicted_ms} ms for a kernel; you measure "
                "{measured_ms} ms. What is the prediction error, measured / predicted - 1? (Answer 0.1 for a kernel "
                "10% slower than predicted.)"),
        params={"predicted_ms": 8.0, "measured_ms": 10.0},
        key=lambda predicted_ms, measured_ms: prediction_error(measured_ms, predicted_ms),
        unit="dimensionless",
        rtol=0.01,
        hints=("Divide the measurement by the prediction.", "Then subtract 1: a perfect prediction scores 0."),
        misconceptions=(
            Misconception("inverted", "You divided the prediction by the measurement. The error is measured / "
                                      "predicted - 1: positive when the kernel is slower than predicted.",
                          answer=lambda predicted_ms, measured_ms: predicted_ms / measured_ms - 1),
            Misconception("relative-to-measured", "You took the difference relative to the measurement. The "
                                                  "prediction is the reference: divide by it.",
                          answer=lambda predicted_ms, measured_ms: (measured_ms - predicted_ms) / measured_ms),
            Misconception("percent", "Write the error as a fraction: 0.1 for 10%.", scale=100),
            Misconception("ratio-not-error", "That is the ratio measured / predicted. The error subtracts 1 from "
                                             "it: a perfect prediction scores 0, not 1.",
                          answer=lambda predicted_ms, measured_ms: measured_ms / predicted_ms),
        ),
        variants={"predicted_ms": (4.0, 8.0, 12.5, 20.0), "measured_ms": (6.0, 10.0, 15.0, 30.0)},
    ),
    Question(
        id="l12.predict-add",
        lesson="12",
        kind="numeric",
        prompt=("A machine measures B = {bandwidth_gbs} GB/s (STREAM triad) and P = {peak_gflops} GFLOP/s in FP32 "
                "(matrix multiply). What time does its roofline predict for z = x + y over n = {n} FP32 elements? "
                "Answer in ms."),
        params={"n": 2**25, "bandwidth_gbs": 20, "peak_gflops": 200},
        key=lambda n, bandwidth_gbs, peak_gflops: _predict_ms(_add(n), peak_gflops, bandwidth_gbs),
        unit="ms",
        rtol=0.02,
        hints=("Count the FLOPs and the bytes, then take the larger of FLOPs / P and bytes / B.",
               "An add reads two arrays and writes one, 4 bytes per element in FP32.",
               "The add is far below the ridge: the memory time decides."),
        misconceptions=(
            Misconception("forgot-write", "You counted the two reads but not the write of z.", scale=2 / 3),
            Misconception("compute-time", "That is the time of the arithmetic alone. The add does 1 FLOP per 12 "
                                          "bytes, far below the ridge: memory decides its time.",
                          answer=lambda n, bandwidth_gbs, peak_gflops: _add(n).flops / (peak_gflops * 1e9) * 1e3),
            Misconception("float64", "You used 8 bytes per element: FP32 takes 4.", scale=2),
        ),
        variants={"n": (2**24, 2**25, 2**26), "bandwidth_gbs": (15, 25, 35, 50)},  # memory-bound: P would not move it
    ),
    Question(
        id="l12.fusion-bytes",
        lesson="12",
        kind="numeric",
        prompt=("numpy runs y = (x * q + bias) * g + r over n = {n} FP32 elements as four passes, each writing a "
                "full-size temporary: t1 = x * q, t2 = t1 + bias, t3 = t2 * g, y = t3 + r. How many bytes cross "
                "memory? (q and bias are single numbers.)"),
        params={"n": 2**25},
        key=lambda n: fusion.chain(list(CHAIN), n, "fp32").unfused.bytes,
        unit="byte",
        rtol=0.01,
        hints=("Count each pass on its own: the arrays it reads and the one it writes.",
               "Passes 1 and 2 read one array each; passes 3 and 4 read two (a temporary and g or r).",
               "Each of them writes one array of n elements, 4 bytes each."),
        misconceptions=(
            Misconception("fused", "That is what a fused kernel moves (x, g and r in, y out). numpy writes every "
                                   "temporary to memory and reads it back.",
                          answer=lambda n: fusion.chain(list(CHAIN), n, "fp32").fused.bytes),
            Misconception("bits-not-bytes", "That is 8x too many: you counted bits.", scale=8),
        ),
        variants={"n": (2**23, 2**24, 2**25, 10**7)},
    ),
    Question(
        id="l12.gpu-ridge",
        lesson="12",
        kind="numeric",
        prompt=("roofkit measure on one {hw}: the best BF16 matrix product of the sweep and the device-to-device copy "
                "give the achievable roofs the catalog keeps beside the datasheet's. What is the ridge point of "
                "those measured roofs, in FLOP/byte?"),
        params={"hw": "h200"},
        key=lambda hw: _ridge(hw),
        unit="FLOP/byte",
        rtol=0.01,
        hints=("The ridge is where the two roofs meet: peak / bandwidth.",
               "Use the measured figures for both roofs, not the datasheet's."),
        misconceptions=(
            Misconception("datasheet-ridge", "That is the datasheet's ridge. The measured roofs fall by different "
                                             "amounts (the peak more than the bandwidth), so their ridge moves.",
                          answer=lambda hw: _ridge(hw, False, False)),
            Misconception("mixed-roofs", "You mixed a measured roof with a datasheet one. Take both from the "
                                         "measurement.", answer=lambda hw: _ridge(hw, True, False)),
            Misconception("inverted", "That is bandwidth / peak. The ridge is peak / bandwidth: FLOPs per byte.",
                          answer=lambda hw: 1 / _ridge(hw)),
        ),
    ),
    Question(
        id="l12.gpu-crossing",
        lesson="12",
        kind="numeric",
        prompt=("An M x {d} x {d} BF16 GEMM (M rows of activations times a {d} x {d} weight) on the {hw}: what is the "
                "smallest whole M at which it is compute-bound on the datasheet roofline?"),
        params={"d": 8192, "hw": "h200"},
        variants={"d": (4096, 8192, 16384), "hw": ("h200", "b200", "mi300x")},  # H100: its measured crossing at d = 8192
        key=lambda d, hw: _crossing(d, hw),                                   # is 294, a step from its datasheet ridge
        unit="dimensionless",
        rtol=0,  # one exact whole number
        hints=("The GEMM's intensity: 2 M d^2 FLOPs over (M d + d^2 + M d) elements of 2 bytes.",
               "Set it equal to the ridge and solve for M; then round up to the first whole M at or above it."),
        misconceptions=(
            Misconception("intensity-equals-batch", "That is 'intensity = M', the limit for M much smaller than d. "
                                                    "The activations' bytes lower the intensity: a larger M is "
                                                    "needed.", answer=lambda d, hw: hardware.get(hw).ridge("bf16")),
            Misconception("measured-ridge", "That is where it crosses the measured roofs' ridge, a real crossing "
                                            "too; the question asks for the datasheet roofline's.",
                          answer=_measured_crossing),
        ),
    ),
    Question(
        id="l12.ex-where",
        lesson="12",
        kind="choice",
        prompt=("Exercise. A CPU has {l2_mib} MiB of L2 per core and a {llc_mib} MiB last-level cache. You time "
                "z = x + y over n = {n} FP32 elements. Where does the kernel's working set fit? L2 (in one core's "
                "L2), LLC (in the last-level cache), >LLC (larger, but less than 4x it: partly served by the "
                "cache), or DRAM (at least 4x the last-level cache: a measurement of memory)?"),
        params={"n": 2**22, "l2_mib": 1, "llc_mib": 32},
        key=_where,
        choices=_LEVELS,
        synonyms={"L2": ("l2 cache", "in l2", "one core's l2"),
                  "LLC": ("last-level cache", "last level cache", "in the llc", "l3", "l3 cache"),
                  ">LLC": ("larger than the llc", "larger than llc", "bigger than the llc", "more than the llc",
                           "beyond the llc", "above the llc", "greater than llc", "partly llc", "> l3"),
                  "DRAM": ("memory", "main memory", "ram", "dram bandwidth")},
        hints=("The working set is every array the kernel touches: x, y and z.",
               "Compare it with the cache, and with 4x the cache (STREAM's rule)."),
        misconceptions=(
            Misconception("one-array", "You sized one array. The kernel touches three, x, y and z: add them up.",
                          answer=_unless_key(lambda n, l2_mib, llc_mib: _where(n, l2_mib, llc_mib, arrays=1))),
            Misconception("bigger-is-enough", "Larger than the cache is not enough: part of the data is still "
                                              "served from it. STREAM asks for at least 4x the cache.",
                          answer=_unless_key(lambda n, l2_mib, llc_mib: "DRAM" if _where(n, l2_mib, llc_mib) == ">LLC"
                                             else "LLC")),
            *(Misconception("wrong-level", "Size the working set (x, y and z, each n FP32 elements) and compare "
                                           "it with each level in turn: one core's L2, the last-level cache, then "
                                           "4x the last-level cache.",
                            answer=_other_level(level)) for level in _LEVELS),
        ),
        points=2,
        variants={"n": (2**16, 2**20, 2**22, 2**24, 2**25), "l2_mib": (1, 2), "llc_mib": (16, 32, 64)},
    ),
    Question(
        id="l12.ex-softmax-traffic",
        lesson="12",
        kind="numeric",
        prompt=("Exercise. numpy computes a row softmax of a [{rows}, {cols}] FP32 array in five passes over the "
                "whole array: max (reads it), subtract (reads, writes), exp (reads, writes), sum (reads), divide "
                "(reads, writes). The CPU's caches allocate on write: each line about to be written is first read "
                "from memory. Counting that read too, by what factor does numpy's traffic exceed that of one "
                "kernel that reads the input once and writes the output once? Ignore the small per-row vectors."),
        params={"rows": 16384, "cols": 1024},
        key=_softmax_ratio,
        unit="dimensionless",
        rtol=0.01,
        hints=("Count array-sized transfers over the five passes: one per read, and two per write (the line is "
               "read before it is written).",
               "The one-kernel softmax reads the input and writes the output: with write-allocate, three transfers."),
        misconceptions=(
            Misconception("no-write-allocate",
                          "That is the ratio without write-allocate (STREAM's convention, and section 5's). Here "
                          "each written array crosses memory twice, in numpy's passes and in the one kernel alike.",
                          answer=lambda rows, cols: _softmax_ratio(rows, cols, write_allocate=False)),
            Misconception("one-side-allocates",
                          "You counted write-allocate on one side only. Count both the same way: every written "
                          "array, in numpy's passes and in the one kernel, is read before it is written.",
                          answer=lambda rows, cols: _softmax_ratio(rows, cols, True, ideal_write_allocate=False)),
            Misconception("passes", "That is the number of passes. Some passes read and write: count transfers.",
                          answer=lambda rows, cols: len(kernels.SOFTMAX_NUMPY_PASSES)),
        ),
        points=2,
    ),
    Question(
        id="l12.ex-fusion-speedup",
        lesson="12",
        kind="numeric",
        prompt=("Exercise. A machine with fast memory, B = {bandwidth_gbs} GB/s, runs this elementwise chain's "
                "arithmetic at P = {peak_gflops} GFLOP/s in FP32 (an interpreter such as numexpr's costs time per "
                "element). Predict the speed-up of fusing y = (x * q + bias) * g + r over n = {n} FP32 elements: the "
                "roofline time of numpy's four passes over the roofline time of one fused pass (ignore per-call "
                "overhead)."),
        params={"n": 2**25, "bandwidth_gbs": 100, "peak_gflops": 20},
        variants={"bandwidth_gbs": (50, 100, 200), "peak_gflops": (15, 20, 30)},  # each ridge P / B once
        key=_fusion_speedup,
        unit="dimensionless",
        rtol=0.02,
        hints=("Is each pass memory- or compute-bound on this machine? Compare its intensity with the ridge P / B.",
               "The fused pass does 4 FLOPs per element and moves 16 bytes; each numpy pass does 1 FLOP and moves "
               "8 or 12 bytes.",
               "Take each pass's max(FLOPs / P, bytes / B), add up the four, and divide by the fused pass's."),
        misconceptions=(
            Misconception("traffic-ratio",
                          "That is the ratio of the bytes, the speed-up when every pass stays memory-bound. At 4 "
                          "FLOPs per 16 bytes the fused pass sits right of this machine's ridge: its arithmetic, not "
                          "its bytes, sets its time.",
                          answer=lambda n, bandwidth_gbs, peak_gflops: None if abs(
                              _fusion_speedup(n, bandwidth_gbs, peak_gflops)
                              - fusion.chain(list(CHAIN), n, "fp32").traffic_ratio) < 0.03 else
                          fusion.chain(list(CHAIN), n, "fp32").traffic_ratio),
            Misconception("launches", "That is the number of kernels saved, not the time. Each pass takes time "
                                      "in proportion to the bytes it moves.",
                          answer=lambda n, bandwidth_gbs, peak_gflops: fusion.chain(list(CHAIN), n, "fp32")
                          .launches_unfused),
            Misconception("flops", "Fusion does not remove FLOPs: the same arithmetic is done either way. It "
                                   "removes bytes, and numpy's passes are limited by bytes.",
                          answer=lambda **p: None if abs(_fusion_speedup(**p) - 1) < 0.03 else 1),
        ),
        points=2,
    ),
)
