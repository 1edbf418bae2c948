"""The performance models: time, memory and communication, from the catalogs and the formulas.

    roofline   attainable FLOP/s, ridge, bound, time bounds of one kernel
    precision  number formats from their bit layout, and real rounding
    training   C = 6ND, MFU and HFU, GPU-hours, cost
    fusion     HBM traffic of op chains, fused and not; Amdahl's law
    layertime  a decoder layer's time, kernel by kernel, a bound or calibrated
    steptime   a training micro-batch, kernel by kernel
    comms      collectives: the alpha-beta model, and as NCCL runs them
    nccl       NCCL's algorithms, protocols and latencies
    inference  serving: KV cache, memory on N GPUs, TTFT, TPOT, throughput (a package)
    parallel   DP, ZeRO, TP, PP, CP, EP: step time, MFU, memory per GPU (a package)

Nothing here draws: the figures are in :mod:`roofkit.plots` (docs/architecture.md).
"""
