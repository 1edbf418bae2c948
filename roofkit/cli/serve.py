"""roofkit serve: does a model fit on N GPUs, how many requests, how fast are its first and next tokens, what it costs."""

from __future__ import annotations

import argparse
import math
from dataclasses import replace

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


def rate(text):
    """An argparse type: requests per second, a positive number, or inf (all at once)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value > 0:  # NaN too
        raise argparse.ArgumentTypeError(f"request rate must be a positive number of requests per second or 'inf' "
                                         f"(all at once); got {text!r}.")
    return value


def seconds(name):
    """An argparse type: a positive number of seconds, such as 2, 0.2 or 200ms."""

    def parse(text):
        from ..units import quantity  # deferred: import roofkit.cli loads no module but errors

        try:
            value = float(text)
        except ValueError:
            try:
                value = float(quantity(text, "s"))
            except (RoofkitError, ValueError):
                value = math.nan
        if not (value > 0 and math.isfinite(value)):
            raise argparse.ArgumentTypeError(f"{name} must be a positive number of seconds (2, 0.2 or 200ms); "
                                             f"got {text!r}.")
        return value

    return parse


_SIMULATION = ("requests", "max_num_seqs", "max_num_batched_tokens", "slo_ttft", "slo_tpot", "seed",
               "max_concurrency")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _percentiles(row, values) -> tuple[str, str]:
    return row, "   ".join(f"{'-' if v is None else human(v, 's'):>10}" for v in values)


def cmd_simulate(args) -> None:
    """``roofkit serve ... --request-rate R`` or ``--static``: a request stream, or a static batch, simulated."""
    from ..catalogs import hardware, models  # deferred: catalogs.hardware pulls in numpy (through formulas)
    from ..perf.inference import serving, simulate  # deferred: perf.inference pulls in numpy (through formulas)

    if args.ep is not None or args.attention_dp or args.adp_schedule is not None:
        raise InvalidValue("--ep and --attention-dp are modelled in the steady state (--input-tokens, --output-tokens) "
                           "and with --context, not in a simulated stream (--request-rate) or --static.")
    if args.static and args.request_rate is not None:
        raise InvalidValue("--static runs one batch from start to end; --request-rate a stream of requests: "
                           "give one of them.")
    if args.input_tokens is None or args.output_tokens is None:
        what = "--static" if args.static else "--request-rate" if args.request_rate is not None else "--max-concurrency"
        raise InvalidValue(f"{what} needs a workload: --input-tokens I and --output-tokens O (not --context).")
    if args.prompt is not None:
        raise InvalidValue("--prompt goes with --context; a workload's prompt is its --input-tokens.")
    options = dict(gpus=args.gpus, tp=args.tp, pp=args.pp, dtype=args.dtype, weights_dtype=args.weights_dtype,
                   kv_dtype=args.kv_dtype, calibrated=args.calibrated, engine=args.engine)
    mode = ("calibrated: achievable roofs, a per-kernel floor and an engine overhead per step" if args.calibrated
            else "a bound: every step at the roofline, datasheet roofs")
    price = args.usd_per_gpu_hour
    if args.static:
        extra = [_flag(k) for k in _SIMULATION if k != "requests" and getattr(args, k) is not None]
        if extra:
            raise InvalidValue(f"{', '.join(extra)} go{'es' if len(extra) == 1 else ''} with a simulated stream of "
                               "requests, not with --static, which takes --batch (or --requests), --input-tokens "
                               "and --output-tokens.")
        if args.batch is not None and args.requests is not None and args.batch != args.requests:
            raise InvalidValue(f"--static runs one batch: --batch ({args.batch}) and --requests ({args.requests}) "
                               "differ; give one.")
        s = simulate.static(args.model, args.hw, args.input_tokens, args.output_tokens,
                            batch=args.batch if args.batch is not None else args.requests, **options)
        data = s.to_dict()
        data["usd_per_million_tokens"] = (None if price is None else
                                          serving.usd_per_million_tokens(s.tokens_per_s, s.gpus, price))
        m, acc = models.get(args.model), hardware.get(args.hw)
        per = f" per replica ({s.replicas} replicas)" if s.replicas > 1 else ""
        lines = [f"{m.name} on {s.gpus} x {acc.name}: a static batch of {s.batch}{per}, {s.workload.input_tokens:,} "
                 f"input and {s.workload.output_tokens:,} output tokens each", f"figures: {mode}", ""]
        rows = [("time to first token", f"{human(s.ttft_s, 's')} (the {s.batch} prompts prefilled together)"),
                ("time per output token", "- (one output token)" if s.tpot_s is None else
                 f"{human(s.tpot_s, 's')} (decode at batch {s.batch}, the mean of its {s.workload.output_tokens - 1} "
                 "steps)"),
                ("end to end", human(s.e2e_s, "s")),
                ("tokens/s", f"{_rate(s.tokens_per_s)} output tokens/s on the {s.gpus} GPU"
                             f"{'s' if s.gpus > 1 else ''}")]
        if data["usd_per_million_tokens"] is not None:
            rows.append(("cost", f"${data['usd_per_million_tokens']:.4g} per million output tokens"))
        lines += table(rows) + [f"note: {n}" for n in s.notes]
        emit(args, data, lines)
        return
    if args.batch is not None:
        raise InvalidValue("--batch sets a steady state's requests in flight; with --request-rate the scheduler "
                           "decides (--max-num-seqs caps them).")
    given = {k: getattr(args, k) for k in _SIMULATION if getattr(args, k) is not None}
    names = {"max_num_seqs": "max_num_seqs", "max_num_batched_tokens": "max_num_batched_tokens",
             "slo_ttft": "slo_ttft_s", "slo_tpot": "slo_tpot_s", "requests": "requests", "seed": "seed",
             "max_concurrency": "max_concurrency"}
    rate = math.inf if args.request_rate is None else args.request_rate  # --max-concurrency alone: all due at once
    s = simulate.simulate(args.model, args.hw, args.input_tokens, args.output_tokens, request_rate=rate,
                          **{names[k]: v for k, v in given.items()}, **options)
    data = s.to_dict()
    data["usd_per_million_tokens"] = (None if price is None else
                                      serving.usd_per_million_tokens(s.tokens_per_s, s.gpus, price))
    m, acc = models.get(args.model), hardware.get(args.hw)
    arrive = ("all at once" if math.isinf(s.request_rate) else
              f"Poisson arrivals at {s.request_rate:g} requests/s (seed {s.seed})")
    if s.max_concurrency is not None:
        arrive = (f"{s.max_concurrency} concurrent users, each sending its next request when its last one finishes"
                  if math.isinf(s.request_rate) else f"{arrive}, at most {s.max_concurrency} outstanding")
    per = f" ({s.replicas} replicas of {s.gpus // s.replicas} GPUs, {s.requests:,} requests each)" \
        if s.replicas > 1 else ""
    lines = [f"{m.name} on {s.gpus} x {acc.name}{per}: {data['requests']:,} requests of "
             f"{s.workload.input_tokens:,} input and {s.workload.output_tokens:,} output tokens, {arrive}",
             f"engine: continuous batching, at most {s.max_num_seqs} requests and {s.max_num_batched_tokens:,} tokens "
             f"per step, chunked prefill, a KV cache of {s.cache_tokens:,} tokens, preemption by recompute",
             f"figures: {mode}", ""]
    lines += table([("", "       p50          p90          p99"),
                    _percentiles("TTFT", [data["ttft_p50_s"], data["ttft_p90_s"], data["ttft_p99_s"]]),
                    _percentiles("TPOT", [data["tpot_p50_s"], data["tpot_p90_s"], data["tpot_p99_s"]]),
                    _percentiles("ITL", [data["itl_p50_s"], data["itl_p90_s"], data["itl_p99_s"]]),
                    _percentiles("E2E", [data["e2e_p50_s"], data["e2e_p90_s"], data["e2e_p99_s"]])])
    rows = [("throughput", f"{_rate(s.tokens_per_s)} output tokens/s, {s.requests_per_s:.4g} requests/s over "
                           f"{human(s.duration_s, 's')}"),
            ("goodput", f"{s.goodput:.4g} requests/s meet TTFT <= {human(s.slo_ttft_s, 's')} and TPOT <= "
                        f"{human(s.slo_tpot_s, 's')} ({data['goodput_fraction']:.1%} of the requests)"),
            ("engine", f"{data['steps']:,} steps, at most {s.peak_running} requests running, "
                       f"{data['preemptions']:,} preemptions")]
    if data["usd_per_million_tokens"] is not None:
        rows.append(("cost", f"${data['usd_per_million_tokens']:.4g} per million output tokens at "
                             f"${price:g} per GPU-hour"))
    lines += [""] + table(rows) + [f"note: {n}" for n in s.notes]
    emit(args, data, lines)


def _adp_calibration(args):
    """The engine calibration with ``--adp-schedule``'s schedule (None without the flag: roofkit's default)."""
    if args.adp_schedule is None:
        return None
    if not (args.attention_dp and args.calibrated):
        raise InvalidValue("--adp-schedule says how an engine hands prompts to the GPUs of data-parallel attention: "
                           "it goes with --attention-dp and --calibrated (the bound spreads them evenly).")
    from ..perf.inference import engine  # deferred: perf.inference pulls in numpy (through formulas)

    return replace(engine.for_engine(args.engine or engine.DEFAULT_ENGINE), adp_schedule=args.adp_schedule)


def cmd_serve(args) -> None:
    if args.request_rate is not None or args.static or args.max_concurrency is not None:
        return cmd_simulate(args)
    extra = [_flag(k) for k in _SIMULATION if getattr(args, k) is not None]
    if extra:
        raise InvalidValue(f"{', '.join(extra)} go{'es' if len(extra) == 1 else ''} with --request-rate R (a "
                           "simulated stream of requests) or --static.")
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
              usd_per_gpu_hour=args.usd_per_gpu_hour, engine=args.engine, ep=args.ep, attention_dp=args.attention_dp,
              calibration=_adp_calibration(args))
    m, acc, plan = models.get(args.model), hardware.get(args.hw), s.memory
    data = s.to_dict()
    layout = (f"attention data-parallel over {plan.tp}" if plan.attention_dp else f"tensor parallel {plan.tp}") \
        + (f", experts over {plan.ep}" if plan.ep > 1 else "") + f", pipeline {plan.pp}"
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
        ("reserve", f"{_gb(plan.reserve_bytes)} ({plan.reserve_fraction:.0%} of "
                    + ("what the weights leave: TensorRT-LLM's KV cache takes the other "
                       f"{1 - plan.reserve_fraction:.0%})" if plan.engine == "tensorrt-llm" else
                       f"each GPU: headroom outside what {plan.engine} uses)")),
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
    p.add_argument("--ep", type=count("ep"), help="a mixture of experts: the GPUs of a replica its routed experts "
                                                  "spread over, dividing --tp (each expert split over tp / ep; "
                                                  "default 1)")
    p.add_argument("--attention-dp", dest="attention_dp", action="store_true",
                   help="a mixture of experts: attention data-parallel over the --tp GPUs, each with its own "
                        "sequences and cache and a copy of all but the routed experts (TensorRT-LLM's "
                        "enable_attention_dp, SGLang's --enable-dp-attention; with --ep tp: the 'DEP' layouts)")
    p.add_argument("--adp-schedule", dest="adp_schedule", choices=("round-robin", "context-wait", "full"),
                   help="with --attention-dp --calibrated: how the engine hands prompts to those GPUs, as uneven as "
                        "TensorRT-LLM measured it (default round-robin, 54%% of the busiest GPU's tokens on the mean "
                        "one; context-wait and full: its attention_dp_config enable_balance, 84%% and 88%%)")
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
                   help="stored weights: bf16, fp8, int8, int4 (with its scales), ... (default: --dtype); families "
                        "in formats of their own after it, e.g. nvfp4,attention=bf16 (NVIDIA's DeepSeek-R1 NVFP4 "
                        "recipe) or nvfp4,attention=bf16,attention.out=nvfp4")
    p.add_argument("--kv-dtype", dest="kv_dtype", help="the KV cache's precision (default: --dtype)")
    p.add_argument("--usd-per-gpu-hour", dest="usd_per_gpu_hour", type=number("usd-per-gpu-hour"),
                   help="price of one GPU-hour: adds dollars per million output tokens")
    p.add_argument("--engine", choices=("vllm", "tensorrt-llm", "sglang"),
                   help="whose memory reserve (vLLM: 10%% of each GPU, the default; TensorRT-LLM: 10%% of what the "
                        "weights leave; SGLang: 12%% to 21%% by tensor parallelism) and, with --calibrated, whose "
                        "tensor-parallel all-reduce")
    p.add_argument("--calibrated", action="store_true",
                   help="an estimate: achievable roofs, a per-kernel floor and an engine overhead per step, fitted "
                        "on published serving runs (default: a bound)")
    sim = p.add_argument_group("a simulated benchmark (with --input-tokens and --output-tokens)")
    sim.add_argument("--request-rate", dest="request_rate", type=rate,
                     help="simulate a stream of requests arriving at R per second (Poisson; inf: all at once) on an "
                          "engine like vLLM's: per-request TTFT, TPOT, ITL, percentiles, throughput, goodput")
    sim.add_argument("--static", action="store_true",
                     help="simulate one batch of --batch (or --requests) requests from start to end "
                          "(default: as many as fit)")
    sim.add_argument("--max-concurrency", dest="max_concurrency", type=count("max-concurrency"),
                     help="at most N requests outstanding at the client (vLLM benchmark_serving's --max-concurrency); "
                          "without --request-rate, N concurrent users, each sending its next request when its last "
                          "one finishes")
    sim.add_argument("--requests", type=count("requests"), help="requests in the stream (default 1000)")
    sim.add_argument("--max-num-seqs", dest="max_num_seqs", type=count("max-num-seqs"),
                     help="requests running at once at most (default 256)")
    sim.add_argument("--max-num-batched-tokens", dest="max_num_batched_tokens",
                     type=tokens("max-num-batched-tokens"), help="tokens per engine step at most (default 8192)")
    sim.add_argument("--slo-ttft", dest="slo_ttft", type=seconds("slo-ttft"),
                     help="goodput's time-to-first-token target, s (default 2)")
    sim.add_argument("--slo-tpot", dest="slo_tpot", type=seconds("slo-tpot"),
                     help="goodput's time-per-output-token target, s (default 0.2)")
    sim.add_argument("--seed", type=count("seed", least=0), help="the arrivals' random seed (default 0)")
    p.set_defaults(func=cmd_serve)
