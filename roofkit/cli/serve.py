"""roofkit serve: does a model fit on N GPUs, how many requests, how fast are its first and next tokens, what it costs."""

from __future__ import annotations

import argparse

from ..errors import InvalidValue, RoofkitError
from ..units import size
from ._common import count, emit, human, number, table


def tokens(name):
    """An argparse type: a whole number of tokens written as 8192, 8e3 or 32,768."""

    def parse(text):
        try:
            value = size(text, name)
        except RoofkitError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
        if value != int(value):
            raise argparse.ArgumentTypeError(f"{name} must be a whole number of tokens; got {text!r}.")
        return int(value)

    return parse


def _gb(value) -> str:
    return f"{value / 1e9:.4g} GB"


def _rate(value) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def cmd_serve(args) -> None:
    from ..catalogs import hardware, models  # deferred: catalogs.hardware pulls in numpy (through formulas)
    from ..perf.inference import serve  # deferred: perf.inference pulls in numpy (through formulas)

    if args.input_tokens is not None and args.output_tokens is None:
        raise InvalidValue("--input-tokens needs --output-tokens: a workload is I input and O output tokens.")
    if args.output_tokens is not None and args.input_tokens is None:
        raise InvalidValue("--output-tokens needs --input-tokens: a workload is I input and O output tokens.")
    if args.prompt is not None and args.input_tokens is not None:
        raise InvalidValue("--prompt goes with --context; a workload's prompt is its --input-tokens.")
    s = serve(args.model, args.hw, gpus=args.gpus, context=args.context, prompt=args.prompt, batch=args.batch,
              dtype=args.dtype, weights_dtype=args.weights_dtype, kv_dtype=args.kv_dtype, calibrated=args.calibrated,
              input_tokens=args.input_tokens, output_tokens=args.output_tokens, tp=args.tp, pp=args.pp,
              usd_per_gpu_hour=args.usd_per_gpu_hour)
    m, acc, plan = models.get(args.model), hardware.get(args.hw), s.memory
    data = s.to_dict()
    layout = f"tensor parallel {plan.tp}, pipeline {plan.pp}"
    if plan.replicas > 1:
        layout = f"{plan.replicas} replicas of {plan.gpus} GPU{'s' if plan.gpus > 1 else ''}, " + layout
    lines = [f"{m.name} on {s.gpus} x {acc.name} ({layout}); "
             f"weights {plan.weights_dtype}, KV cache {plan.kv_dtype}, math in {s.dtype}", ""]
    w = s.steady
    lines.append("memory" + (" (one replica)" if plan.replicas > 1 else " (all GPUs)"))
    per_seq = (f"{_gb(plan.kv_bytes_per_sequence)} at {plan.context:,} tokens" if w is None else
               f"{_gb(plan.kv_bytes_per_sequence)} at {plan.context:,} tokens (the average request, I + O/2, "
               "in 16-token blocks)")
    lines += table([
        ("capacity", f"{_gb(plan.capacity_bytes)} (what the cards report)"),
        ("reserve", f"{_gb(plan.reserve_bytes)} ({plan.reserve_fraction:.0%} of each GPU: headroom outside what the "
                    "engine uses)"),
        ("weights", _gb(plan.weights_bytes)),
        ("KV cache per token", f"{human(plan.kv_bytes_per_token, 'B')} (every layer, K and V)"),
        ("KV cache per sequence", per_seq),
        ("largest batch", f"{plan.max_batch} sequences of {plan.context:,} tokens"),
    ])
    lines += [plan.verdict]
    if s.tpot_s is not None or (w is not None and s.ttft_s is not None):
        mode = ("calibrated: achievable roofs, a per-kernel floor and an engine overhead per step" if s.calibrated
                else "a bound: datasheet roofs, every cost at its best")
        lines += ["", f"latency and throughput ({mode})"]
        rate = s.tokens_per_s
        if w is not None:
            rows = [
                ("workload", f"{w.workload.input_tokens:,} input and {w.workload.output_tokens:,} output tokens per "
                             "request, continuous batching"),
                ("requests in flight", f"{s.batch} per replica (each step decodes them and prefills "
                                       f"{w.prefill_tokens_per_step:.4g} prompt tokens)"),
                ("time to first token", f"{human(s.ttft_s, 's')} (its prompt in {w.chunks} chunk"
                                        f"{'s' if w.chunks > 1 else ''} beside the others' decode; no queueing)"),
                ("time per output token", "- (one output token)" if s.tpot_s is None else
                 f"{human(s.tpot_s, 's')} (a step: decode and the prefill it carries)"),
            ]
        else:
            critical = ("never, at this context: each sequence's cache read grows with the batch as fast as the math"
                        if s.critical_batch is None else f"batch {s.critical_batch}")
            rows = [
                ("time to first token", f"{human(s.ttft_s, 's')} (prefill of {s.prompt:,} tokens)"),
                ("time per output token", f"{human(s.tpot_s, 's')} (decode step at batch {s.batch})"),
                ("compute-bound from", critical),
            ]
        per_user = "" if s.tpot_s is None else f", {_rate(1 / s.tpot_s)} per user"
        rows.append(("tokens/s", f"{_rate(rate)} output tokens/s on the {s.gpus} GPU{'s' if s.gpus > 1 else ''}, "
                                 f"{_rate(rate / s.gpus)} per GPU{per_user}"))
        if s.usd_per_million_tokens is not None:
            rows.append(("cost", f"${s.usd_per_million_tokens:.4g} per million output tokens at "
                                 f"${s.usd_per_gpu_hour:g} per GPU-hour"))
        lines += table(rows)
    lines += [f"note: {n}" for n in data["notes"]]
    emit(args, data, lines)


def register(sub, common) -> None:
    p = sub.add_parser("serve", help="serving a model: memory plan, requests in flight, TTFT, TPOT, tokens/s, cost",
                       parents=[common])
    p.add_argument("--model", required=True, help="model name, e.g. llama-3-70b (see roofkit.models.names())")
    p.add_argument("--hw", required=True, help="accelerator name, e.g. h100")
    p.add_argument("--gpus", type=count("gpus"), default=1, help="GPUs given (default 1)")
    p.add_argument("--tp", type=count("tp"), help="tensor-parallel GPUs per replica (default: all of --gpus, inside "
                                                  "one NVLink domain; with --tp, --gpus / (tp x pp) replicas)")
    p.add_argument("--pp", type=count("pp"), help="pipeline stages per replica (default 1 with --tp)")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--input-tokens", dest="input_tokens", type=tokens("input tokens"),
                      help="a workload: prompt tokens per request (with --output-tokens)")
    what.add_argument("--context", type=tokens("context"), help="tokens per sequence (prompt + output), every "
                                                                "sequence decoded at that context")
    p.add_argument("--output-tokens", dest="output_tokens", type=tokens("output tokens"),
                   help="a workload: generated tokens per request")
    p.add_argument("--prompt", type=tokens("prompt"), help="with --context: the prompt of the time to first token "
                                                            "(default: --context)")
    p.add_argument("--batch", type=count("batch"), help="requests in flight per replica (default: with a workload, as "
                                                        "many as fit; with --context, 1)")
    p.add_argument("--dtype", default="bf16", help="math (and activations) (default bf16)")
    p.add_argument("--weights-dtype", dest="weights_dtype",
                   help="stored weights: bf16, fp8, int8, int4 (with its scales), ... (default: --dtype)")
    p.add_argument("--kv-dtype", dest="kv_dtype", help="the KV cache's precision (default: --dtype)")
    p.add_argument("--usd-per-gpu-hour", dest="usd_per_gpu_hour", type=number("usd-per-gpu-hour"),
                   help="price of one GPU-hour: adds dollars per million output tokens")
    p.add_argument("--calibrated", action="store_true",
                   help="an estimate: achievable roofs, a per-kernel floor and an engine overhead per step, fitted "
                        "on published serving runs (default: a bound)")
    p.set_defaults(func=cmd_serve)
