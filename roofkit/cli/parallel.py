"""roofkit parallel: step time, MFU and memory per GPU of a TP x CP x PP x DP (x EP) training layout."""

from __future__ import annotations

import argparse

from ..perf.recipe import NAMES as RECIPES
from ..perf.recipe import RECIPES as _RECIPE_TABLE
from ._common import count, emit, human, number, size, table, token_count

RECIPE_HELP = {n: r.description for n, r in _RECIPE_TABLE.items()}


def cmd_parallel(args) -> None:
    from ..perf import parallel  # deferred: loaded only when this command runs

    plan = parallel.plan(args.model, args.hw, args.gpus, args.global_batch_tokens, args.seq, tp=args.tp, pp=args.pp,
                         dp=args.dp, cp=args.cp, ep=args.ep, zero=args.zero, microbatches=args.microbatches,
                         virtual_stages=args.virtual_stages, dtype=args.dtype, recompute=args.recompute,
                         sequence_parallel=args.sequence_parallel, overlap=not args.no_overlap,
                         tp_overlap=args.tp_overlap, policy=args.fsdp_policy, attention=args.attention,
                         efficiency=args.efficiency, achievable=args.achievable, intra=args.intra, inter=args.inter,
                         node_gpus=args.node_gpus, gather_api=args.gather_api, calibrated=args.calibrated,
                         recipe=args.recipe, etp=args.etp, max_nodes_per_token=args.max_nodes_per_token,
                         dispatch_dtype=args.dispatch_dtype, dispatcher=args.dispatcher,
                         moe_imbalance=args.moe_imbalance, moe_expert_s=args.moe_expert_s)
    mode = ("calibrated estimate: achievable roofs, NCCL's measured bandwidth, fitted constants" if plan.calibrated
            else "bound: datasheet roofs, line-rate links, perfect overlap (no real run is faster)")
    extras = f", {plan.policy}" if plan.policy else ""
    rows = [("layout", f"{plan.model} on {plan.gpus} x {plan.accelerator}: {plan.layout}{extras}, "
                       f"{plan.microbatches} micro-batches of {plan.microbatch_tokens:,.0f} tokens"
                       + (", sequence parallel" if plan.sequence_parallel else "")),
            ("mode", mode),
            *_precision_rows(plan),
            ("links", f"{plan.intra} inside a node of {plan.node_gpus}, {plan.inter or 'none'} between nodes"),
            *_expert_rows(plan),
            ("step time", human(plan.step_time_s, "s")),
            ("  compute", f"{human(plan.compute_s, 's')} (recomputation: {plan.recompute})"),
            ("  communication (exposed)", human(plan.communication_s, "s"))]
    rows += [(f"    {kind} ({c['collective']})", f"{human(c['exposed_s'], 's')} exposed of {human(c['time_s'], 's')}")
             for kind, c in plan.communication.items()]
    if plan.experts_host_s:
        each = human(plan.constants["moe_expert_s"], "s")
        rows.append(("  experts one by one", f"{human(plan.experts_host_s, 's')} ({each} per local expert, MoE layer "
                                             "and micro-batch, fitted)"))
    rows += [("  pipeline bubble", human(plan.bubble_s, "s") + (f" ({plan.schedule})" if plan.pp > 1 else "")),
             ("  optimizer", human(plan.optimizer_s, "s")),
             ("tokens/s", f"{plan.tokens_per_s:,.0f}"),
             ("MFU", f"{plan.mfu:.1%}  (HFU {plan.hfu:.1%})"),
             ("memory per GPU", f"{human(plan.memory_per_gpu_bytes, 'B')} at the least  ("
                                + ", ".join(f"{k} {human(v, 'B')}" for k, v in plan.memory.items() if k != "total")
                                + (f"; pipeline stage {plan.memory_stage}" if plan.pp > 1 else "") + ")"),
             ("  estimate", f"{human(plan.memory_estimate_bytes, 'B')} with activations as Megatron-LM's eager "
                            f"layers keep them (activations {human(plan.memory_estimate['activations'], 'B')})"),
             ("fits", "unknown" if plan.fits is None else
              f"{'yes' if plan.fits else 'no'} ({human(plan.memory_capacity_bytes, 'B')} per GPU)")]
    if plan.critical_batch_tokens_per_gpu is not None:
        rows.append(("critical batch", f"{plan.critical_batch_tokens_per_gpu:,.0f} tokens per GPU "
                                       f"(this layout: {plan.tokens_per_gpu:,.0f})"))
    rows += [("warning", w) for w in plan.warnings]
    emit(args, plan.to_dict(), table(rows))


def _precision_rows(plan) -> list[tuple[str, str]]:
    """A row naming the recipe where the kernels do not all run in one precision (--dtype fp8, --recipe)."""
    p = plan.precisions
    if len({p[f] for f in ("base", "linear", "dgrad", "wgrad", "attention", "attention_backward", "head")}) == 1:
        return []
    return [("precision", f"recipe {plan.recipe}: linear GEMMs {p['linear']} (dgrad {p['dgrad']}, wgrad "
                          f"{p['wgrad']}), attention {p['attention']} (backward {p['attention_backward']}), output "
                          f"layer {p['head']}, norms and activations {p['base']}; MFU against the "
                          f"{plan.mfu_peak_precision} peak")]


def _expert_rows(plan) -> list[tuple[str, str]]:
    """A row for the experts' layout and dispatch, where the model's experts are spread (--ep, --etp)."""
    ep = plan.communication.get("ep", {}).get("experts")
    if ep is None:
        return []
    c = ep["copies_per_token"]
    limit = f", at most {ep['max_nodes_per_token']} nodes a token" if ep["max_nodes_per_token"] else ""
    share = f"; grouped GEMMs at {ep['grouped_gemm_share']:.0%} of the matmul rate" if plan.calibrated else ""
    return [("experts", f"EP {plan.ep} x ETP {plan.etp} x EDP {plan.expert_dp}; each GPU dispatches "
                        f"{ep['tokens_per_gpu']:,.0f} tokens x top-{ep['top_k']} in {ep['dispatch_dtype']}{limit} "
                        f"({ep['dispatcher']}): {c['network']:.2f} network and {c['nvlink']:.2f} NVLink copies a "
                        f"token; {ep['tokens_per_expert']:,.0f} tokens per expert{share}")]


def register(sub, common) -> None:
    p = sub.add_parser("parallel", help="step time, MFU and memory per GPU of a parallel training layout",
                       parents=[common])
    p.add_argument("--model", required=True,
                   help="a model from the catalog (e.g. llama-3-70b), a TOML file or a Hugging Face config.json")
    p.add_argument("--hw", required=True, help="accelerator name, e.g. h100")
    p.add_argument("--gpus", required=True, type=count("gpus"), help="GPUs in all")
    p.add_argument("--tp", type=count("tp"), default=1, help="tensor-parallel degree (default 1)")
    p.add_argument("--pp", type=count("pp"), default=1, help="pipeline stages (default 1)")
    p.add_argument("--dp", type=count("dp"), help="data-parallel degree (default gpus / (tp cp pp))")
    p.add_argument("--cp", type=count("cp"), default=1, help="context-parallel degree (default 1)")
    p.add_argument("--ep", type=count("ep"), default=1,
                   help="expert-parallel degree, folded with --etp over each pipeline stage's TP x CP x DP GPUs as "
                        "Megatron-Core folds them (default 1); ep x etp must divide tp x cp x dp")
    # the experts (roofkit.parallel.experts)
    p.add_argument("--etp", type=count("etp"),
                   help="expert-tensor-parallel degree: each expert split over that many GPUs (default: --tp; 1 "
                        "keeps whole experts on a GPU, Megatron-Core's --expert-tensor-parallel-size)")
    p.add_argument("--max-nodes-per-token", type=count("max-nodes-per-token"),
                   help="node-limited routing: each token's experts on at most this many nodes (DeepSeek-V3: 4; "
                        "default: unlimited)")
    p.add_argument("--dispatch-dtype", choices=("bf16", "fp8"), default="bf16",
                   help="precision of the experts' dispatch: bf16 (default) or fp8 (1 byte an element and an FP32 "
                        "scale per 128, as DeepSeek-V3); the combine stays bf16")
    p.add_argument("--dispatcher", choices=("alltoall", "deepep"), default="alltoall",
                   help="how the estimate sends the tokens: alltoall (default; Megatron-Core's NCCL all-to-all, a row "
                        "per token and expert) or deepep (once per node, then over NVLink); the bound sends the "
                        "least any router could")
    p.add_argument("--moe-imbalance", type=number("moe-imbalance"),
                   help="with --calibrated: the busiest expert GPU's tokens over the mean (default: the fitted "
                        "constant, 1.0 until fitted); the bound is perfectly balanced")
    p.add_argument("--moe-expert-s", dest="moe_expert_s", type=number("moe-expert-s", zero=True),
                   help="with --calibrated: seconds each expert a GPU holds adds to an MoE layer's forward and "
                        "backward of a micro-batch (default: the fitted constant, Megatron-Core with Transformer "
                        "Engine's expert-by-expert GEMMs; 0 for one fused grouped GEMM over every expert)")
    p.add_argument("--zero", type=int, choices=(0, 1, 2, 3), default=0, help="ZeRO stage (default 0)")
    p.add_argument("--fsdp-policy", choices=("full-shard", "shard-grad-op", "per-step"),
                   help="ZeRO-3's gathering: full-shard (default; gathers again for the backward), shard-grad-op "
                        "(once per micro-batch), per-step (once per step, as Llama 3)")
    p.add_argument("--gather-api", choices=("flat", "list"), default="flat",
                   help="how ZeRO-3 hands its buffers to the collectives: flat (default; one buffer a call, FSDP) or "
                        "list (a tensor per rank, each parameter on its own: DeepSpeed's ZeRO-3 of 2021)")
    p.add_argument("--global-batch-tokens", required=True, type=token_count("global-batch-tokens"),
                   help="tokens per optimizer step: 4194304, or 4M (M = 2^20 here, as papers mean a 4M-token "
                        "batch); whole sequences per data-parallel replica")
    p.add_argument("--seq", required=True, type=size("seq"), help="sequence length, e.g. 8192")
    p.add_argument("--microbatches", type=count("microbatches"),
                   help="micro-batches per replica (default: one sequence each)")
    p.add_argument("--virtual-stages", type=count("virtual-stages"), default=1,
                   help="interleaved chunks per pipeline stage (default 1: 1F1B)")
    p.add_argument("--dtype", default="bf16",
                   help="compute precision (default bf16); fp8 is Transformer Engine's default recipe, the linear "
                        "layers' GEMMs in FP8 and the rest in BF16 (see --recipe)")
    p.add_argument("--recipe", choices=RECIPES,
                   help="precision of each kernel family (default: the dtype's): " + "; ".join(
                       f"{n}: {d}" for n, d in RECIPE_HELP.items()))
    p.add_argument("--recompute", nargs="?", const="full", default="none", choices=("none", "selective", "full"),
                   help="activation recomputation: none (default), selective, full (--recompute alone)")
    p.add_argument("--sequence-parallel", action="store_true",
                   help="sequence parallelism: norms and residuals split over the TP ranks (activations / tp)")
    p.add_argument("--attention", choices=("flash", "unfused"), default="flash",
                   help="attention kernels: flash (default) or unfused (scores through HBM)")
    p.add_argument("--no-overlap", action="store_true", help="hide no communication behind compute")
    p.add_argument("--tp-overlap", action="store_true",
                   help="the run overlaps TP traffic with its GEMMs (calibrated; Megatron-Core's --tp-comm-overlap)")
    p.add_argument("--calibrated", action="store_true",
                   help="an estimate (achievable roofs, NCCL's measured bandwidth, shares fitted on published runs) "
                        "instead of the bound")
    p.add_argument("--efficiency", type=number("efficiency"), default=1.0,
                   help="scale the matmul rate by this share (default 1)")
    p.add_argument("--achievable", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--intra", metavar="LINK", help="link inside a node (default: the accelerator's NVLink domain)")
    p.add_argument("--node-gpus", type=count("node-gpus"),
                   help="GPUs a node holds, where the link does not say (PCIe servers)")
    p.add_argument("--inter", metavar="LINK", help="link between nodes (default: its first scale-out network)")
    p.set_defaults(func=cmd_parallel)
