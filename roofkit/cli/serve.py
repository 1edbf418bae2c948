"""roofkit serve: does a model fit on N GPUs, how large a batch, and how fast are its first and next tokens."""

from __future__ import annotations

import argparse

from ._common import count, emit, human, table


def tokens(name):
    """An argparse type: a whole number of tokens written as 8192, 8e3 or 32,768."""

    def parse(text):
        from ..errors import RoofkitError
        from ..units import size

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


def cmd_serve(args) -> None:
    from .. import hardware, models
    from ..inference import serve

    s = serve(args.model, args.hw, gpus=args.gpus, context=args.context, prompt=args.prompt, batch=args.batch,
              dtype=args.dtype, weights_dtype=args.weights_dtype, kv_dtype=args.kv_dtype,
              calibrated=args.calibrated)
    m, acc, plan = models.get(args.model), hardware.get(args.hw), s.memory
    data = s.to_dict()
    lines = [f"{m.name} on {plan.gpus} x {acc.name} (tensor parallel {plan.tp}, pipeline {plan.pp}); "
             f"weights {plan.weights_dtype}, KV cache {plan.kv_dtype}, math in {s.dtype}",
             "", "memory (all GPUs)"]
    lines += table([
        ("capacity", _gb(plan.capacity_bytes)),
        ("reserve", f"{_gb(plan.reserve_bytes)} ({plan.reserve_fraction:.0%} of each GPU: activations, runtime)"),
        ("weights", _gb(plan.weights_bytes)),
        ("KV cache per token", f"{human(plan.kv_bytes_per_token, 'B')} (every layer, K and V)"),
        ("KV cache per sequence", f"{_gb(plan.kv_bytes_per_sequence)} at {plan.context:,} tokens"),
        ("largest batch", f"{plan.max_batch} sequences of {plan.context:,} tokens"),
    ])
    lines += [plan.verdict]
    if s.tpot_s is not None:
        rate = s.tokens_per_s
        critical = ("never, at this context: each sequence's cache read grows with the batch as fast as the math"
                    if s.critical_batch is None else f"batch {s.critical_batch}")
        lines += ["", f"latency and throughput ({'calibrated: achievable roofs and a per-kernel floor' if s.calibrated else 'roofline sum, datasheet roofs'})"]
        lines += table([
            ("time to first token", f"{human(s.ttft_s, 's')} (prefill of {s.prompt:,} tokens)"),
            ("time per output token", f"{human(s.tpot_s, 's')} (decode step at batch {s.batch})"),
            ("tokens/s", f"{rate:.4g} for the batch, {rate / plan.gpus:.4g} per GPU, {1 / s.tpot_s:.4g} per user"),
            ("compute-bound from", critical),
        ])
    lines += [f"note: {n}" for n in data["notes"]]
    emit(args, data, lines)


def register(sub, common) -> None:
    p = sub.add_parser("serve", help="serving a model: memory plan, largest batch, TTFT, TPOT and tokens/s",
                       parents=[common])
    p.add_argument("--model", required=True, help="model name, e.g. llama-3-70b (see roofkit.models.names())")
    p.add_argument("--hw", required=True, help="accelerator name, e.g. h100")
    p.add_argument("--gpus", type=count("gpus"), default=1, help="GPUs serving one copy of the model (default 1)")
    p.add_argument("--dtype", default="bf16", help="activations and math (default bf16)")
    p.add_argument("--weights-dtype", dest="weights_dtype",
                   help="stored weights: bf16, fp8, int8, int4 (with its scales), ... (default: --dtype)")
    p.add_argument("--kv-dtype", dest="kv_dtype", help="the KV cache's precision (default: --dtype)")
    p.add_argument("--context", required=True, type=tokens("context"), help="tokens per sequence (prompt + output)")
    p.add_argument("--prompt", type=tokens("prompt"), help="tokens of the prompt, for the time to first token "
                                                            "(default: --context)")
    p.add_argument("--batch", type=count("batch"), default=1, help="sequences decoded together (default 1)")
    p.add_argument("--calibrated", action="store_true",
                   help="achievable roofs and the per-kernel floor fitted on measured H200 layers")
    p.set_defaults(func=cmd_serve)
