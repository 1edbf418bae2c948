"""How fast is the serving simulation, and what does it say? The latency-throughput curve of one workload.

    python benchmarks/serving_simulation.py [--model llama-3-8b] [--hw h100] [--input-tokens 1000]
                                            [--output-tokens 200] [--requests 2000]

Prints:

1. the wall-clock time to simulate 2,000 and 10,000 requests at 10 requests/s
   (roofkit.inference.simulate.simulate; target: 10,000 in under 2 s on two cores),
   and of the command `roofkit serve ... --request-rate 10 --requests 2000 --json` in-process;
2. a latency-throughput table over request rates, up to all at once (inf), and over
   concurrent users (a closed loop, --max-concurrency): TTFT, TPOT and ITL percentiles,
   output tokens/s and goodput, with the steady state of `roofkit serve` (no queue) and
   a static batch for comparison.

Not a pass/fail test: the figures are bounds (every step at the roofline).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import time

from roofkit import cli
from roofkit.perf.inference import serving, simulate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llama-3-8b")
    ap.add_argument("--hw", default="h100")
    ap.add_argument("--input-tokens", type=int, default=1000)
    ap.add_argument("--output-tokens", type=int, default=200)
    ap.add_argument("--requests", type=int, default=2000, help="requests per rate in the table")
    a = ap.parse_args()
    I, O = a.input_tokens, a.output_tokens

    print("time to simulate (request rate 10/s):")
    for n in (2000, 10_000):
        start = time.perf_counter()
        s = simulate.simulate(a.model, a.hw, I, O, request_rate=10, requests=n)
        took = time.perf_counter() - start
        print(f"  {n:>6,} requests: {took:.3f} s ({len(s.step_s):,} engine steps, {s.step_model_calls} calls of "
              "latency.step)")
    argv = ["serve", "--model", a.model, "--hw", a.hw, "--input-tokens", str(I), "--output-tokens", str(O),
            "--request-rate", "10", "--requests", "2000", "--json"]
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        code = cli.main(argv)
    print(f"  roofkit {' '.join(argv)}: {time.perf_counter() - start:.3f} s in-process (exit {code})")

    steady = serving.serve(a.model, a.hw, input_tokens=I, output_tokens=O)
    print(f"\n{a.model} on {a.hw}, {I} in / {O} out, {a.requests:,} requests per rate (a bound):")
    head = (f"{'rate/s':>7} {'TTFT p50':>10} {'TTFT p99':>10} {'TPOT p50':>10} {'TPOT p99':>10} {'ITL p99':>10} "
            f"{'tokens/s':>9} {'goodput/s':>10} {'running':>8} {'preempt':>8}")
    print(head)
    for rate in (1, 5, 10, 20, 30, 40, 60, math.inf):
        s = simulate.simulate(a.model, a.hw, I, O, request_rate=rate, requests=a.requests)
        ms = lambda v: f"{v * 1e3:>8.1f}ms" if v < 10 else f"{v:>9.2f}s"  # noqa: E731
        print(f"{rate:>7g} {ms(s.ttft_s(50))} {ms(s.ttft_s(99))} {ms(s.tpot_s(50))} {ms(s.tpot_s(99))} "
              f"{ms(s.itl_s(99))} {s.tokens_per_s:>9,.0f} {s.goodput:>10.3g} {s.peak_running:>8} "
              f"{int(s.preemptions.sum()):>8}")
    print(f"\nconcurrent users (--max-concurrency N, each sends its next request when its last one finishes):")
    print(head.replace(" rate/s", "  users"))
    for users in (1, 8, 32, 128, 256):
        s = simulate.simulate(a.model, a.hw, I, O, requests=a.requests, max_concurrency=users)
        print(f"{users:>7} {ms(s.ttft_s(50))} {ms(s.ttft_s(99))} {ms(s.tpot_s(50))} {ms(s.tpot_s(99))} "
              f"{ms(s.itl_s(99))} {s.tokens_per_s:>9,.0f} {s.goodput:>10.3g} {s.peak_running:>8} "
              f"{int(s.preemptions.sum()):>8}")
    print(f"steady state of `roofkit serve` (no queue): batch {steady.batch}, TTFT {steady.ttft_s * 1e3:.1f} ms, "
          f"TPOT {steady.tpot_s * 1e3:.2f} ms, {steady.tokens_per_s:,.0f} tokens/s")
    st = simulate.static(a.model, a.hw, I, O, batch=simulate.MAX_NUM_SEQS)
    print(f"static batch of {st.batch}: TTFT {st.ttft_s:.3f} s, TPOT {st.tpot_s * 1e3:.2f} ms, end to end "
          f"{st.e2e_s:.2f} s, {st.tokens_per_s:,.0f} tokens/s")


if __name__ == "__main__":
    main()
