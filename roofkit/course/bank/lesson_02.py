"""Lesson 02, arithmetic intensity: FLOPs per byte of GEMM, GEMV and elementwise ops."""

from ... import formulas
from ..quiz import Misconception, Question, register


def _symbols(*names):
    import sympy  # deferred: sympy costs ~0.25 s at import

    return sympy.symbols(" ".join(names), positive=True)


def _square_gemm_intensity():
    """I(n, b) of an n x n x n GEMM, simplified: 2n/(3b)."""
    import sympy  # deferred: sympy costs ~0.25 s at import

    n, b = _symbols("n", "b")
    return sympy.simplify(formulas.gemm(n, n, n, b).intensity)


def _batch_limit():
    """lim_{n -> oo} I of x[M, n] @ W[n, n]: 2M/b, 'intensity ~ batch' at 2 bytes."""
    import sympy  # deferred: sympy costs ~0.25 s at import

    M, n, b = _symbols("M", "n", "b")
    return sympy.limit(formulas.gemm(M, n, n, b).intensity, n, sympy.oo)


def _gemm_intensity(m=4096, n=4096, k=4096, b=2):
    return formulas.gemm(m, n, k, b).intensity


_INVERTED = "You divided bytes by FLOPs. Intensity is FLOPs per byte: FLOPs on top."

register(
    Question(
        id="l02.vector-add",
        lesson="02",
        kind="numeric",
        prompt=("c = a + b adds two vectors of {n} elements in {dtype} and writes c. "
                "What is its arithmetic intensity?"),
        params={"n": 2**24, "dtype": "fp16"},
        key=lambda n, dtype: formulas.elementwise(n, 1, 2, 1, dtype).intensity,
        unit="FLOP/byte",
        rtol=0.01,
        hints=(
            "One FLOP per element. How many vectors cross HBM, and how many bytes is each element?",
            "a and b are read, c is written: three vectors of n elements.",
        ),
        misconceptions=(
            Misconception("forgot-output-write", "You counted the two reads but not the write of c: "
                                                 "the output crosses HBM too.",
                          answer=lambda n, dtype: formulas.elementwise(n, 1, 2, 0, dtype).intensity),
            Misconception("elements-not-bytes", "You divided by elements. Intensity is per byte: "
                                                "multiply the element count by the bytes per element.",
                          answer=lambda n, dtype: formulas.elementwise(n, 1, 2, 1, 1).intensity),
            Misconception("bits-not-bytes", "That is 8x too small: you counted bits. FP16 is 16 bits = 2 bytes.",
                          scale=1 / 8),
            Misconception("inverted", _INVERTED,
                          answer=lambda n, dtype: 1 / formulas.elementwise(n, 1, 2, 1, dtype).intensity),
        ),
    ),
    Question(
        id="l02.gelu",
        lesson="02",
        kind="numeric",
        prompt=("An elementwise GELU reads a tensor of n elements in {dtype} (b bytes each) and writes n back, "
                "doing f = {f} FLOPs per element. What is its arithmetic intensity? (Take n = {n}; does the answer "
                "depend on it?)"),
        params={"n": 2**24, "f": formulas.GELU_FLOPS_PER_ELEMENT, "dtype": "fp16"},
        variants={"f": (5, 6, 8, 10, 12, 14)},
        key=lambda n, f, dtype: formulas.elementwise(n, f, 1, 1, dtype).intensity,
        unit="FLOP/byte",
        rtol=0.01,
        figures=3,
        hints=(
            "Write FLOPs and bytes as multiples of n. What happens to n in the ratio?",
            "FLOPs = f n. Bytes: one read and one write of n elements, b bytes each.",
        ),
        misconceptions=(
            Misconception("forgot-write-or-elements",
                          "Too large by 2x: you either counted only the read (the write of n elements crosses HBM "
                          "too) or divided by elements instead of bytes (2 bytes each).",
                          answer=lambda n, f, dtype: formulas.elementwise(n, f, 1, 0, dtype).intensity),
            Misconception("bits-not-bytes", "That is 8x too small: you counted bits. FP16 is 2 bytes.", scale=1 / 8),
            Misconception("inverted", _INVERTED,
                          answer=lambda n, f, dtype: 1 / formulas.elementwise(n, f, 1, 1, dtype).intensity),
        ),
    ),
    Question(
        id="l02.square-gemm",
        lesson="02",
        kind="symbolic",
        prompt=("Write the arithmetic intensity of a square GEMM, C[n, n] = A[n, n] @ B[n, n], with b bytes per "
                "element, as an expression in n and b (e.g. \"n/(4*b)\")."),
        key=_square_gemm_intensity,
        symbols=("n", "b"),
        hints=(
            "FLOPs: 2MNK with M = N = K = n.",
            "Bytes: three n x n matrices cross HBM (two read, one written), b bytes per element.",
            "Divide and cancel the common powers of n.",
        ),
        misconceptions=(
            Misconception("mnk", "You counted n^3 FLOPs: each multiply-add is 2 FLOPs.",
                          answer=lambda: _square_gemm_intensity() / 2),
            Misconception("forgot-output-write", "You counted two matrices of traffic: C is written to HBM too, "
                                                 "so three n x n matrices cross.",
                          answer=lambda: _square_gemm_intensity() * 3 / 2),
            Misconception("elements-not-bytes", "Your expression has no b: divide by bytes, not elements.",
                          answer=lambda: _square_gemm_intensity().subs(_symbols("b"), 1)),
        ),
    ),
    Question(
        id="l02.gemm-4096",
        lesson="02",
        kind="numeric",
        prompt="What is the arithmetic intensity of a {n} x {n} x {n} GEMM in {dtype}?",
        params={"n": 4096, "dtype": "bf16"},
        variants={"n": (1024, 2048, 3072, 6144, 8192, 16384)},
        key=lambda n, dtype: formulas.gemm(n, n, n, dtype).intensity,
        unit="FLOP/byte",
        rtol=0.01,
        hints=(
            "Use the square-GEMM expression you just derived, with the bytes per element of the format.",
            "BF16 has 2 bytes per element.",
        ),
        misconceptions=(
            Misconception("mnk", "Half the right value: an FMA is 2 FLOPs, so count 2n^3, not n^3.", scale=0.5),
            Misconception("forgot-output-write", "You counted only the reads of A and B: the output C is "
                                                 "written to HBM too.",
                          answer=lambda n, dtype: formulas.gemm(n, n, n, dtype).intensity * 3 / 2),
            Misconception("elements-not-bytes", "You divided by elements: BF16 takes 2 bytes per element.",
                          answer=lambda n, dtype: formulas.gemm(n, n, n, 1).intensity),
            Misconception("bits-not-bytes", "That is 8x too small: you counted bits. BF16 is 2 bytes.", scale=1 / 8),
        ),
    ),
    Question(
        id="l02.gemv-decode",
        lesson="02",
        kind="numeric",
        prompt=("A decode step at batch 1 multiplies x[1, K] by W[K, N] with K = {k} and N = {n}, in {dtype} "
                "(a GEMV: M = 1). What is its arithmetic intensity?"),
        params={"n": 4096, "k": 4096, "dtype": "bf16"},
        key=lambda n, k, dtype: formulas.gemv(n, k, dtype).intensity,
        unit="FLOP/byte",
        rtol=0.01,
        hints=(
            "Same 2MNK and (MK + KN + MN) b as any GEMM, with M = 1.",
            "Which of the three matrices dominates the traffic?",
            "FLOPs 2NK; bytes about KN b, the weight matrix W. Divide.",
        ),
        misconceptions=(
            Misconception("the-0.5", "About 0.5 is a common claim, and it is wrong by a factor of two: after "
                                     "cancelling a factor of K from the ratio, the output's term is N/K (about 1), "
                                     "not N. The FLOPs are 2NK, and the weight matrix alone is NK elements of b "
                                     "bytes, so the ratio cannot be far from 2/b.",
                          answer=lambda n, k, dtype: k / (1 + k + n)),
            Misconception("elements-not-bytes", "You divided by elements: BF16 takes 2 bytes per element.",
                          answer=lambda n, k, dtype: formulas.gemv(n, k, 1).intensity),
            Misconception("bits-not-bytes", "That is 8x too small: you counted bits. BF16 is 2 bytes.", scale=1 / 8),
        ),
    ),
    Question(
        id="l02.mlp-gemm",
        lesson="02",
        kind="numeric",
        prompt=("An MLP up-projection runs on M = {m} tokens: x[M, K] @ W[K, N] with K = {k} and N = {n}, in "
                "{dtype}. What is its arithmetic intensity?"),
        params={"m": 8192, "n": 32768, "k": 8192, "dtype": "bf16"},
        variants={"m": (1024, 2048, 4096, 8192, 16384), "n": (24576, 28672, 32768)},
        key=lambda m, n, k, dtype: formulas.gemm(m, n, k, dtype).intensity,
        unit="FLOP/byte",
        rtol=0.01,
        hints=(
            "The shape is not square: count FLOPs and bytes from M, N and K.",
            "Bytes are (MK + KN + MN) b: x, W and the output.",
        ),
        misconceptions=(
            Misconception("square-shortcut", "You used the square formula 2n/(3b) with n = K. The product is "
                                             "not square: count (MK + KN + MN) elements.",
                          answer=lambda m, n, k, dtype: formulas.gemm(k, k, k, dtype).intensity),
            Misconception("mnk", "Half the right value: count 2MNK FLOPs, not MNK.", scale=0.5),
            Misconception("elements-not-bytes", "You divided by elements: BF16 takes 2 bytes per element.",
                          answer=lambda m, n, k, dtype: formulas.gemm(m, n, k, 1).intensity),
            Misconception("bits-not-bytes", "That is 8x too small: you counted bits. BF16 is 2 bytes.", scale=1 / 8),
        ),
    ),
    Question(
        id="l02.ex-intensity-code",
        lesson="02",
        kind="code",
        prompt=("Exercise. Write gemm_intensity(m, n, k, b): the arithmetic intensity in FLOP/byte of "
                "C[m, n] = A[m, k] @ B[k, n] with b bytes per element, under the ideal traffic model."),
        key=_gemm_intensity,
        cases=((4096, 4096, 4096, 2), (1, 4096, 4096, 2), (8192, 32768, 8192, 2), (16, 8192, 8192, 1),
               (3, 5, 7, 4)),
        hidden_cases=((1, 1, 1, 2), (128, 14336, 4096, 0.5), (65536, 64, 64, 2)),
        rtol=1e-9,
        hints=(
            "Two counts and a division.",
            "FLOPs = 2mnk; bytes = (mk + kn + mn) b.",
        ),
        points=2,
    ),
    Question(
        id="l02.ex-batch-limit",
        lesson="02",
        kind="symbolic",
        prompt=("Exercise. A decode step with a batch of M sequences computes x[M, n] @ W[n, n], b bytes per "
                "element. As the model gets wider (n -> infinity, M fixed), what does its arithmetic intensity "
                "approach? Answer as an expression in M and b."),
        key=_batch_limit,
        symbols=("M", "b"),
        hints=(
            "Write the intensity from 2MNK and (MK + KN + MN) b with N = K = n.",
            "For large n, which term of the byte count dominates?",
            "Divide the FLOPs and the bytes by n^2 and let n grow: which terms survive?",
        ),
        misconceptions=(
            Misconception("slogan", "'Intensity is about the batch' holds at 2 bytes per element only: "
                                    "keep b in the answer.", answer=lambda: _symbols("M")),
            Misconception("mnk", "Half the right value: count 2MNK FLOPs, not MNK.",
                          answer=lambda: _batch_limit() / 2),
            Misconception("elements-not-bytes", "Your expression has no b: divide by bytes, not elements.",
                          answer=lambda: _batch_limit().subs(_symbols("b"), 1)),
        ),
        points=2,
    ),
)
