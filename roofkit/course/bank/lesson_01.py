"""Lesson 01, counting FLOPs and bytes: 2MNK, HBM traffic, traffic vs footprint, work vs rate."""

from ... import dtypes, formulas
from ..quiz import Misconception, Question, register

# One multiply-add is a 1 x 1 x 1 matrix product: 2 FLOPs in the course's convention.
FLOPS_PER_FMA = formulas.FLOPS_PER_FMA

_LINEAR = {"tokens": 2048, "d_model": 4096, "d_ff": 14336}  # Llama-3-8B-sized MLP projection


def _linear(tokens, d_model, d_ff, dtype="bf16"):
    """y[T, d_ff] = x[T, d] @ W[d, d_ff]: gemm(M=T, N=d_ff, K=d)."""
    return formulas.gemm(tokens, d_ff, d_model, dtype)


def _lora_flops(tokens=2048, d=4096, r=16):
    """(x @ A) @ B with x [T, d], A [d, r], B [r, d]: two GEMMs, left to right."""
    return formulas.gemm(tokens, r, d).flops + formulas.gemm(tokens, d, r).flops


register(
    Question(
        id="l01.gemm-flops",
        lesson="01",
        kind="numeric",
        prompt=("A linear layer computes y = x @ W with x of shape [{tokens}, {d_model}] and W of shape "
                "[{d_model}, {d_ff}] (M x K times K x N). How many FLOPs does the matrix product cost?"),
        params=dict(_LINEAR),
        variants={"tokens": (512, 1024, 4096, 8192), "d_ff": (11008, 13696, 14336, 16384)},
        key=lambda tokens, d_model, d_ff: _linear(tokens, d_model, d_ff).flops,
        unit="FLOP",
        rtol=0.01,
        hints=(
            "Each element of y is a dot product of a row of x with a column of W. How long is it?",
            "A dot product of length K is K multiply-adds; y has M x N elements.",
            "Each multiply-add is 2 FLOPs: the total is 2 x M x N x K, with M the rows of x, K its columns "
            "(the rows of W) and N the columns of W.",
        ),
        misconceptions=(
            Misconception("mnk", "You counted each multiply-add once. An FMA is a multiply and an add, "
                                 "2 FLOPs, so a matrix product costs 2MNK, not MNK.", scale=0.5),
            Misconception("rate-for-work", "That is a rate (FLOP/s). The question asks for the amount of work: "
                                           "a count of FLOPs, with no 'per second'.", unit=True),
        ),
    ),
    Question(
        id="l01.gemm-bytes",
        lesson="01",
        kind="numeric",
        prompt=("The same product, y[{tokens}, {d_ff}] = x[{tokens}, {d_model}] @ W[{d_model}, {d_ff}], in {dtype}. "
                "Under the ideal traffic model (each input read from HBM once, the output written once), "
                "how many bytes cross HBM?"),
        params={**_LINEAR, "dtype": "bf16"},
        variants={"tokens": (512, 1024, 4096, 8192), "d_ff": (11008, 13696, 14336, 16384)},
        key=lambda tokens, d_model, d_ff, dtype: _linear(tokens, d_model, d_ff, dtype).bytes,
        unit="byte",
        rtol=0.01,
        figures=3,
        hints=(
            "Three matrices cross HBM: two are read, one is written.",
            "Count elements of x, W and y, then multiply by the bytes per element of the format.",
            "BF16 stores each element in 16 bits: how many bytes is that?",
        ),
        misconceptions=(
            Misconception("forgot-output-write",
                          "You counted the reads of x and W but not the write of y: the output crosses HBM too.",
                          answer=lambda tokens, d_model, d_ff, dtype:
                          (tokens * d_model + d_model * d_ff) * dtypes.bytes_per_element(dtype)),
            Misconception("bits-not-bytes", "That is 8x too many: you counted bits. BF16 is 16 bits = 2 bytes "
                                            "per element.", scale=8),
            Misconception("elements-not-bytes", "You counted elements. Multiply by the bytes per element "
                                                "of the format.",
                          answer=lambda tokens, d_model, d_ff, dtype: _linear(tokens, d_model, d_ff, 1).bytes),
        ),
    ),
    Question(
        id="l01.reduction-flops",
        lesson="01",
        kind="numeric",
        prompt=("A kernel sums each row of a matrix x of shape [{rows}, {cols}] (a reduction along the last axis), "
                "writing one value per row. Counting one add per element, how many FLOPs does it do?"),
        params={"rows": 8192, "cols": 4096},
        variants={"rows": (1024, 3072, 6144, 12288), "cols": (1024, 2048, 8192, 14336)},
        key=lambda rows, cols: formulas.reduction(rows, cols).flops,
        unit="FLOP",
        rtol=0.01,
        hints=(
            "What does the kernel do with each element of x?",
            "Each element is added once into its row's running total. How many elements does x have?",
        ),
        misconceptions=(
            Misconception("fma-in-a-sum", "A sum is adds only: one FLOP per element. There is no multiply, so no "
                                          "multiply-add to count twice.", scale=2),
            Misconception("one-per-row", "That is one FLOP per row. Each row's total needs one add for every "
                                         "element of the row.",
                          answer=lambda rows, cols: rows),
            Misconception("rate-for-work", "That is a rate (FLOP/s); the question asks for a count of FLOPs.",
                          unit=True),
        ),
    ),
    Question(
        id="l01.reduction-bytes",
        lesson="01",
        kind="numeric",
        prompt=("The same row sum of x[{rows}, {cols}] in {dtype}, writing one {dtype} value per row. Under the "
                "ideal traffic model, how many bytes cross HBM?"),
        params={"rows": 8192, "cols": 4096, "dtype": "bf16"},
        variants={"rows": (1024, 3072, 6144, 12288), "cols": (1024, 2048, 8192, 14336)},
        key=lambda rows, cols, dtype: formulas.reduction(rows, cols, dtype).bytes,
        unit="byte",
        rtol=0.01,
        hints=(
            "What is read, and what is written? The output is one value per row of x.",
            "Count the elements of x and of the output, then multiply by the bytes per element of the format.",
        ),
        misconceptions=(
            Misconception("output-full-size", "You wrote an output as large as x, as an elementwise op would. A row "
                                              "sum writes one value per row.",
                          answer=lambda rows, cols, dtype: formulas.elementwise(rows * cols, 1, 1, 1, dtype).bytes),
            Misconception("bits-not-bytes", "That is 8x too many: you counted bits. BF16 is 16 bits = 2 bytes.",
                          scale=8),
            Misconception("elements-not-bytes", "You counted elements. Multiply by the bytes per element of the "
                                                "format.",
                          answer=lambda rows, cols, dtype: formulas.reduction(rows, cols, 1).bytes),
        ),
    ),
    Question(
        id="l01.achieved-rate",
        lesson="01",
        kind="numeric",
        prompt=("Timed with CUDA events, a square matrix product of two n x n matrices, n = {n}, takes {ms} ms "
                "on average. What FLOP rate did it achieve?"),
        params={"n": 8192, "ms": 1.6},
        variants={"n": (4096, 6144, 8192), "ms": (1.4, 1.6, 2.1, 2.7, 3.4)},
        key=lambda n, ms: formulas.gemm(n, n, n).flops / (ms / 1000),
        unit="FLOP/s",
        rtol=0.01,
        hints=(
            "A rate is work divided by time.",
            "The work is the FLOP count of the product; the time must be in seconds.",
            "2 n^3 FLOPs, divided by the time in seconds (1 ms = 1e-3 s).",
        ),
        misconceptions=(
            Misconception("work-for-rate", "That is an amount of work (FLOPs). The question asks for a rate: "
                                           "divide the FLOPs by the time.", unit=True),
            Misconception("mnk", "You counted each multiply-add once: a matrix product does 2n^3 FLOPs, "
                                 "so the rate doubles.", scale=0.5),
            Misconception("ms-as-s", "You divided by the time in milliseconds as if it were in seconds: "
                                     "convert to seconds first.", scale=1e-3),
        ),
    ),
    Question(
        id="l01.fvcore-macs",
        lesson="01",
        kind="numeric",
        prompt=("fvcore counts one multiply-add as one 'flop'. For y = x @ W with x [{tokens}, {d_model}] and "
                "W [{d_model}, {d_ff}], what number does fvcore report?"),
        params=dict(_LINEAR),
        variants={"tokens": (512, 1024, 4096, 8192), "d_ff": (11008, 13696, 14336, 16384)},
        key=lambda tokens, d_model, d_ff: _linear(tokens, d_model, d_ff).flops / FLOPS_PER_FMA,
        unit="dimensionless",
        rtol=0.01,
        hints=(
            "fvcore's unit is the multiply-add, not the FLOP.",
            "How many multiply-adds does x @ W perform? One per element of y per column of x.",
        ),
        misconceptions=(
            Misconception("reported-flops", "That is the count in FLOPs (2 per multiply-add), what PyTorch's "
                                            "FlopCounterMode reports. fvcore reports multiply-adds: half as many.",
                          scale=2),
        ),
    ),
    Question(
        id="l01.decode-traffic",
        lesson="01",
        kind="numeric",
        prompt=("{requests} decode requests each need y = x @ W for one token, with W of shape "
                "[{d_model}, {d_ff}] in {dtype}. Served one at a time (one matrix-vector product per request), "
                "how many bytes cross HBM in total?"),
        params={"requests": 32, "d_model": 4096, "d_ff": 14336, "dtype": "bf16"},
        variants={"requests": (8, 16, 32, 64, 128), "d_ff": (11008, 13696, 14336, 16384)},
        key=lambda requests, d_model, d_ff, dtype: formulas.gemv(d_ff, d_model, dtype).scale(requests).bytes,
        unit="byte",
        rtol=0.01,
        figures=3,
        hints=(
            "Each product is its own kernel launch. What does each one read?",
            "W does not stay on chip between launches: every launch reads all of it again.",
            "Traffic = (number of launches) x (bytes one matrix-vector product moves).",
        ),
        misconceptions=(
            Misconception("footprint", "You counted W once, as if it stayed on chip: that is its footprint, "
                                       "or the traffic of one batched product. Served one at a time, every "
                                       "request reads W from HBM again.",
                          answer=lambda requests, d_model, d_ff, dtype:
                          formulas.gemm(requests, d_ff, d_model, dtype).bytes),
            Misconception("bits-not-bytes", "That is 8x too many: you counted bits, not bytes.", scale=8),
        ),
    ),
    Question(
        id="l01.ex-mlp-bytes",
        lesson="01",
        kind="numeric",
        prompt=("Exercise. A transformer MLP runs as three kernels on {tokens} tokens in {dtype}: "
                "h = x @ W_up (x [{tokens}, {d_model}], W_up [{d_model}, {d_ff}]), then g = GELU(h), then "
                "y = g @ W_down (W_down [{d_ff}, {d_model}]). How many bytes cross HBM in total, under the ideal "
                "model for each kernel?"),
        params={**_LINEAR, "dtype": "bf16"},
        variants={"tokens": (512, 1024, 4096, 8192), "d_ff": (11008, 13696, 14336, 16384)},
        key=lambda tokens, d_model, d_ff, dtype: formulas.mlp(tokens, d_model, d_ff, dtype).bytes,
        unit="byte",
        rtol=0.01,
        figures=3,
        hints=(
            "Count each kernel on its own: what it reads and what it writes. Then add the three.",
            "h is written by the first kernel and read by GELU; g is written by GELU and read by the last kernel.",
            "Each intermediate (h, then g) has as many elements as x @ W_up and crosses HBM twice: once out, "
            "once back in.",
        ),
        misconceptions=(
            Misconception("intermediates-free", "You counted the MLP as one fused kernel, with h and g never leaving "
                                                "the chip. As three kernels, each intermediate is written to HBM "
                                                "and read back.",
                          answer=lambda tokens, d_model, d_ff, dtype:
                          formulas.mlp(tokens, d_model, d_ff, dtype).bytes
                          - formulas.elementwise(tokens * d_ff, 0, 2, 2, dtype).bytes),
            Misconception("intermediates-once", "You counted each intermediate once (its footprint). Traffic counts "
                                                "every crossing: h and g are each written once and read once.",
                          answer=lambda tokens, d_model, d_ff, dtype:
                          formulas.mlp(tokens, d_model, d_ff, dtype).bytes
                          - formulas.elementwise(tokens * d_ff, 0, 1, 1, dtype).bytes),
            Misconception("bits-not-bytes", "That is 8x too many: you counted bits, not bytes.", scale=8),
        ),
        points=2,
    ),
    Question(
        id="l01.ex-lora-flops",
        lesson="01",
        kind="code",
        prompt=("Exercise. A LoRA adapter computes (x @ A) @ B with x [T, d], A [d, r] and B [r, d], left to "
                "right. Write lora_flops(T, d, r) returning its FLOP count (both products)."),
        key=_lora_flops,
        cases=((2048, 4096, 16), (1, 4096, 8), (512, 1024, 64), (3, 5, 7)),
        hidden_cases=((8192, 8192, 128), (1, 1, 1)),
        rtol=1e-9,
        hints=(
            "Two matrix products, one after the other. What are the shapes of each?",
            "x @ A is [T, d] @ [d, r]; its result [T, r] then multiplies B [r, d].",
            "Each product costs 2MNK; add the two.",
        ),
        points=2,
    ),
)
