"""A real point-to-point and a real all-reduce between processes on this machine, and their α and β.

    >>> from roofkit.measure import comms
    >>> profile = comms.measure_comms(quick=True)     # doctest: +SKIP
    >>> print(profile.report())                      # doctest: +SKIP
    >>> profile.plot("comms.png")                    # doctest: +SKIP

Several processes (2 by default) exchange buffers from 8 bytes to megabytes:

* point-to-point: rank 0 sends S bytes to rank 1, which sends them back; half
  the round trip is one message, fitted to T = α + S/β;
* all-reduce: every rank sums a float32 buffer of S bytes with the others,
  fitted to the ring's T = 2(n-1) α + 2(n-1)/n S/β (:mod:`roofkit.comms`).

The transport is PyTorch's ``torch.distributed`` when PyTorch is installed
(gloo on CPUs; NCCL when there are at least 2 CUDA GPUs, one per process: then
this measures NVLink or PCIe), and plain TCP sockets over the loopback
interface otherwise, with a ring all-reduce written here. Every sample is the
best of several repeats, each started after a barrier. The α and β of a
machine's loopback are far from NVLink's; the point is the method: the same
two numbers, fitted the same way, describe both.
"""

from __future__ import annotations

import datetime
import json
import math
import multiprocessing
import platform
import select
import socket
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..perf import comms
from ..errors import InvalidValue, RoofkitError

__all__ = ["measure_comms", "CommsProfile", "MeasurementFailed", "choose_backend", "run_rank", "SocketTransport",
           "TorchTransport", "QUICK_SIZES", "DEFAULT_SIZES", "BACKENDS", "cli_run"]

QUICK_SIZES = tuple(2**k for k in range(3, 23, 2))  # 8 B to 2 MiB, every factor of 4
DEFAULT_SIZES = tuple(2**k for k in range(3, 25))  # 8 B to 16 MiB, every factor of 2
BACKENDS = ("auto", "socket", "gloo", "nccl")
_SOCKET_BUFFER = 4 * 2**20  # bytes of kernel buffer per socket and direction: fewer round trips for big messages


class MeasurementFailed(RuntimeError, RoofkitError):
    """A measuring process failed or did not answer in time."""


def choose_backend(prefer: str = "auto", torch=None) -> tuple[str, str]:
    """(backend, why): 'nccl' with 2+ CUDA GPUs, else 'gloo' with PyTorch, else 'socket'."""
    if prefer not in BACKENDS:
        raise InvalidValue(f"unknown backend {prefer!r}; expected one of: {', '.join(BACKENDS)}.")
    if prefer == "socket":
        return "socket", "plain TCP sockets (asked for)"
    if torch is None:
        try:
            import torch  # deferred: torch is optional, and slow to import
        except ImportError:
            if prefer != "auto":
                raise InvalidValue(f"backend {prefer!r} needs PyTorch, which is not installed; use 'socket'.") from None
            return "socket", "plain TCP sockets (PyTorch is not installed)"
    dist = torch.distributed
    if not dist.is_available():
        return "socket", "plain TCP sockets (this PyTorch has no torch.distributed)"
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if prefer in ("auto", "nccl") and gpus >= 2 and dist.is_nccl_available():
        return "nccl", f"torch.distributed with NCCL on {gpus} CUDA GPUs"
    if prefer == "nccl":
        raise InvalidValue(f"backend 'nccl' needs at least 2 CUDA GPUs and NCCL; this machine has {gpus} GPUs.")
    return "gloo", "torch.distributed with gloo on the CPU"


# --- transports -----------------------------------------------------------------------------


class SocketTransport:
    """A ring of TCP connections over loopback: each rank talks to its left and right neighbours."""

    def __init__(self, rank: int, world: int, left: socket.socket, right: socket.socket):
        self.rank, self.world, self.left, self.right = rank, world, left, right
        self.device = "cpu"

    @classmethod
    def connect(cls, rank: int, world: int, ports_pipe) -> "SocketTransport":
        """Listen, tell the parent the port, learn every rank's port, connect right, accept from the left."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        ports_pipe.send(listener.getsockname()[1])
        ports = ports_pipe.recv()
        right = socket.create_connection(("127.0.0.1", ports[(rank + 1) % world]))
        left, _ = listener.accept()
        listener.close()
        for s in (left, right):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # small messages leave at once
            for option in (socket.SO_SNDBUF, socket.SO_RCVBUF):
                s.setsockopt(socket.SOL_SOCKET, option, _SOCKET_BUFFER)
        return cls(rank, world, left, right)

    def buffer(self, nbytes: int):
        return np.ones(max(1, math.ceil(nbytes / 4)), dtype=np.float32)

    def send(self, buf, peer: int) -> None:
        """To a neighbour: rightwards to rank + 1, else leftwards (each connection carries both ways)."""
        sock = self.right if peer == (self.rank + 1) % self.world else self.left
        sock.sendall(memoryview(buf).cast("B"))

    def recv(self, buf, peer: int) -> None:
        """From a neighbour: from the left if it is rank - 1, else from the right."""
        sock = self.left if peer == (self.rank - 1) % self.world else self.right
        _recv_into(sock, memoryview(buf).cast("B"))

    def barrier(self) -> None:
        """Two passes of a one-byte token round the ring: everyone has arrived, then everyone may go."""
        token = bytearray(1)
        for _ in range(2):
            if self.rank == 0:
                self.right.sendall(token)
                _recv_into(self.left, memoryview(token))
            else:
                _recv_into(self.left, memoryview(token))
                self.right.sendall(token)

    def all_reduce(self, buf) -> None:
        """Ring all-reduce (sum): n-1 reduce-scatter steps, then n-1 all-gather steps."""
        n, r = self.world, self.rank
        chunks = np.array_split(buf, n)
        scratch = np.empty_like(chunks[0])
        for s in range(n - 1):
            out, into = chunks[(r - s) % n], chunks[(r - s - 1) % n]
            _exchange(self.right, memoryview(out).cast("B"), self.left, memoryview(scratch[:len(into)]).cast("B"))
            into += scratch[:len(into)]
        for s in range(n - 1):
            out, into = chunks[(r - s + 1) % n], chunks[(r - s) % n]
            _exchange(self.right, memoryview(out).cast("B"), self.left, memoryview(into).cast("B"))

    def sync(self) -> None:
        pass

    def close(self) -> None:
        for s in (self.left, self.right):
            s.close()


def _recv_into(sock: socket.socket, view: memoryview) -> None:
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got:])
        if n == 0:
            raise ConnectionError("a measuring process closed its connection")
        got += n


def _exchange(out_sock, out: memoryview, in_sock, into: memoryview) -> None:
    """Send ``out`` on one socket while receiving ``into`` on another, without deadlock."""
    sent = got = 0
    out_sock.setblocking(False)
    in_sock.setblocking(False)
    try:
        while sent < len(out) or got < len(into):
            readers = [in_sock] if got < len(into) else []
            writers = [out_sock] if sent < len(out) else []
            readable, writable, _ = select.select(readers, writers, [], 30)
            if not readable and not writable:
                raise TimeoutError("no data for 30 s between measuring processes")
            if writable:
                sent += out_sock.send(out[sent:])
            if readable:
                n = in_sock.recv_into(into[got:])
                if n == 0:
                    raise ConnectionError("a measuring process closed its connection")
                got += n
    finally:
        out_sock.setblocking(True)
        in_sock.setblocking(True)


class TorchTransport:
    """torch.distributed: gloo on CPU tensors, or NCCL with one CUDA GPU per rank."""

    def __init__(self, rank: int, world: int, backend: str, port: int, torch=None):
        if torch is None:
            import torch  # deferred: torch is optional, and slow to import
        self.torch, self.dist, self.rank, self.world, self.backend = torch, torch.distributed, rank, world, backend
        if backend == "nccl":
            torch.cuda.set_device(rank)
            self.device = f"cuda:{rank}"
        else:
            self.device = "cpu"
        self.dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)

    def buffer(self, nbytes: int):
        return self.torch.ones(max(1, math.ceil(nbytes / 4)), dtype=self.torch.float32, device=self.device)

    def send(self, buf, peer: int) -> None:
        self.dist.send(buf, peer)

    def recv(self, buf, peer: int) -> None:
        self.dist.recv(buf, peer)

    def barrier(self) -> None:
        if self.backend == "nccl":
            self.dist.barrier(device_ids=[self.rank])
        else:
            self.dist.barrier()

    def all_reduce(self, buf) -> None:
        self.dist.all_reduce(buf)

    def sync(self) -> None:
        if self.backend == "nccl":
            self.torch.cuda.synchronize()

    def close(self) -> None:
        self.dist.destroy_process_group()


# --- the measurement, on every rank -----------------------------------------------------------


def run_rank(transport, sizes, repeats: int, timer=time.perf_counter) -> dict:
    """Time a ping-pong between ranks 0 and 1 and an all-reduce over every rank, at each size.

    Returns, on rank 0, {"p2p": [seconds per size], "all_reduce": [...]}, each the
    best of ``repeats`` (ranks other than 0 return the same shape, untimed).
    """
    rank = transport.rank
    result = {"p2p": [], "all_reduce": []}
    for size in sizes:
        buf = transport.buffer(size)
        transport.all_reduce(buf)  # warm-up: connections, buffers, caches
        transport.sync()
        best_p2p = best_ar = math.inf
        for _ in range(repeats):
            transport.barrier()
            t0 = timer()
            if rank == 0:
                transport.send(buf, 1)
                transport.recv(buf, 1)
            elif rank == 1:
                transport.recv(buf, 0)
                transport.send(buf, 0)
            transport.sync()
            best_p2p = min(best_p2p, (timer() - t0) / 2)  # one way: half the round trip
            transport.barrier()
            t0 = timer()
            transport.all_reduce(buf)
            transport.sync()
            best_ar = min(best_ar, timer() - t0)
        result["p2p"].append(best_p2p)
        result["all_reduce"].append(best_ar)
    return result


def _worker(rank, world, backend, port, ports_pipe, sizes, repeats, queue):
    transport = None
    try:
        if backend == "socket":
            transport = SocketTransport.connect(rank, world, ports_pipe)
        else:
            transport = TorchTransport(rank, world, backend, port)
        result = run_rank(transport, sizes, repeats)
        queue.put((rank, result, transport.device))
    except BaseException as error:  # noqa: BLE001 - report any failure to the parent, in one line
        queue.put((rank, None, f"{type(error).__name__}: {error} | {traceback.format_exc(limit=3)}"))
    finally:
        if transport is not None:
            try:
                transport.close()
            except Exception:  # noqa: BLE001 - closing after a failure may fail too
                pass


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- the result ---------------------------------------------------------------------------------


@dataclass
class CommsProfile:
    """What :func:`measure_comms` measured, and α and β fitted to it."""

    host: str
    date: str
    backend: str
    backend_note: str
    device: str
    processes: int
    quick: bool
    p2p: comms.Fit
    all_reduce: comms.Fit
    elapsed_s: float = 0.0

    def report(self) -> str:
        S = self.all_reduce.sizes[-1]
        bus = comms.busbw("all-reduce", S, self.processes, self.all_reduce.times[-1])
        star = comms.latency_bound_size("p2p", 2, self.p2p.alpha_s, self.p2p.bandwidth_bytes_per_s)

        def line(label, f, per):
            return (f"{label:<22} α = {f.alpha_s * 1e6:8.2f} µs{per}  β = {f.bandwidth_bytes_per_s / 1e9:7.3f} GB/s"
                    f"   fit error: median {f.median_error:.0%}, max {f.max_error:.0%}")

        return "\n".join([
            f"{self.processes} processes on {self.host}: {self.backend_note}",
            f"sizes {self.p2p.sizes[0]:.0f} B to {self.p2p.sizes[-1] / 2**20:g} MiB, best of several runs each",
            line("point-to-point", self.p2p, "        "),
            line(f"all-reduce ({self.processes} ranks)", self.all_reduce, " a step"),
            f"all-reduce bus bandwidth at {S / 2**20:g} MiB: {bus / 1e9:.3f} GB/s (nccl-tests' busbw)",
            f"a message is latency-bound below about {star / 1e3:.1f} kB (where α = S/β)",
        ])

    def to_dict(self) -> dict:
        return {"host": self.host, "date": self.date, "backend": self.backend, "backend_note": self.backend_note,
                "device": self.device, "processes": self.processes, "quick": self.quick,
                "alpha_s": self.p2p.alpha_s, "beta_bytes_per_s": self.p2p.bandwidth_bytes_per_s,
                "p2p": self.p2p.to_dict(), "all_reduce": self.all_reduce.to_dict(), "elapsed_s": self.elapsed_s}

    def save(self, path) -> None:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_dict(), f, indent=2)

    def plot(self, path=None, title=None):
        """Measured time against message size, with the fitted α-β model; saved to ``path`` if given."""
        from matplotlib.figure import Figure  # deferred: matplotlib costs ~0.4 s at import

        fig = Figure(figsize=(8, 5), layout="constrained")  # not registered with pyplot: nothing left open
        ax = fig.add_subplot()
        for fit, colour, label in ((self.p2p, "C0", "point-to-point"),
                                   (self.all_reduce, "C3", f"all-reduce, {self.processes} ranks")):
            ax.plot(fit.sizes, fit.times, "o", color=colour, label=f"{label}: measured", gid="measured")
            S = np.geomspace(fit.sizes[0], fit.sizes[-1], 200)
            model = (comms.latency_term(fit.collective, fit.gpus, fit.alpha_s)  # T = steps·α + f·S/β, on an array
                     + comms.volume(fit.collective, fit.gpus) * S / fit.bandwidth_bytes_per_s)
            ax.plot(S, model, "-", color=colour, lw=1.2, gid="model",
                    label=f"{label}: α = {fit.alpha_s * 1e6:.1f} µs, β = {fit.bandwidth_bytes_per_s / 1e9:.2f} GB/s")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message size S (bytes)")
        ax.set_ylabel("time (s)")
        ax.set_title(title or f"Communication on {self.host} ({self.backend}): T = steps·α + f·S/β")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        if path is not None:
            fig.savefig(path, dpi=120, bbox_inches="tight")
        return fig


def measure_comms(quick: bool = False, processes: int = 2, backend: str = "auto", sizes=None, repeats=None,
                  timeout_s: float | None = None) -> CommsProfile:
    """Start ``processes`` processes, time point-to-point and all-reduce messages, fit α and β."""
    if isinstance(processes, bool) or not isinstance(processes, int) or processes < 2:
        raise InvalidValue(f"processes must be a whole number of at least 2; got {processes!r}.")
    name, note = choose_backend(backend)
    if name == "nccl":
        import torch  # deferred: torch is optional, and slow to import

        processes = min(processes, torch.cuda.device_count())
    sizes = tuple(int(s) for s in (sizes or (QUICK_SIZES if quick else DEFAULT_SIZES)))
    if len(set(sizes)) < 2 or min(sizes) < 1:
        raise InvalidValue(f"sizes must hold at least two different sizes of at least 1 byte; got {sizes!r}.")
    repeats = repeats or (5 if quick else 10)
    timeout_s = timeout_s or (60 if quick else 600)
    started = time.perf_counter()
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    pipes = [ctx.Pipe() for _ in range(processes)]
    port = _free_port()
    workers = [ctx.Process(target=_worker, args=(r, processes, name, port, pipes[r][1], sizes, repeats, queue),
                           daemon=True) for r in range(processes)]
    for w in workers:
        w.start()
    results = {}
    try:
        if name == "socket":
            ports = [_poll(pipes[r][0], timeout_s, r, workers[r]) for r in range(processes)]
            for parent_end, _ in pipes:
                parent_end.send(ports)
        deadline = time.monotonic() + timeout_s
        while len(results) < processes:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise MeasurementFailed(f"the measuring processes did not finish within {timeout_s:g} s.")
            try:
                rank, result, detail = queue.get(timeout=min(remaining, 1.0))
            except Exception:  # queue.Empty: check that nobody died
                dead = [r for r, w in enumerate(workers) if w.exitcode not in (None, 0) and r not in results]
                if dead:
                    raise MeasurementFailed(f"measuring process {dead[0]} exited with code "
                                            f"{workers[dead[0]].exitcode}.") from None
                continue
            if result is None:
                raise MeasurementFailed(f"measuring process {rank} failed: {detail.splitlines()[0][:300]}")
            results[rank] = (result, detail)
    finally:
        for w in workers:
            w.join(timeout=5)
            if w.is_alive():
                w.terminate()
                w.join(timeout=5)
        for ends in pipes:
            for end in ends:
                end.close()
        queue.close()
        queue.join_thread()
    timed, device = results[0]
    p2p = comms.fit(sizes, timed["p2p"], "p2p")
    ar = comms.fit(sizes, timed["all_reduce"], "all-reduce", gpus=processes)
    return CommsProfile(host=platform.node() or "this machine", date=datetime.date.today().isoformat(),
                        backend=name, backend_note=note, device=device, processes=processes, quick=bool(quick),
                        p2p=p2p, all_reduce=ar, elapsed_s=time.perf_counter() - started)


def _poll(conn, timeout_s: float, rank: int, worker=None):
    """What rank ``rank`` sends first (its port), or MeasurementFailed as soon as it has died or timed out."""
    deadline = time.monotonic() + timeout_s
    while not conn.poll(min(0.1, max(0.0, deadline - time.monotonic()))):
        if worker is not None and worker.exitcode is not None:
            raise MeasurementFailed(
                f"measuring process {rank} exited with code {worker.exitcode} before it started (multiprocessing "
                "starts each one by importing the main program: run from a script file or a notebook, not stdin).")
        if time.monotonic() >= deadline:
            raise MeasurementFailed(f"measuring process {rank} did not start within {timeout_s:g} s.")
    return conn.recv()


def cli_run(quick: bool, plot=None, save=None) -> tuple[dict, list[str]]:
    """What ``roofkit measure --comms [PLOT]`` prints: (the JSON object, the text lines)."""
    for path, flag in ((plot, "--comms"), (save, "--save")):
        if path and not Path(path).resolve().parent.is_dir():
            raise InvalidValue(f"{flag}: the folder of {path!r} does not exist.")
    profile = measure_comms(quick=quick)
    lines = [profile.report()]
    if plot:
        profile.plot(plot)
        lines.append(f"plot of time against message size, with the fitted model: {plot}")
    else:
        lines.append("to save the plot: roofkit measure --comms comms.png")
    if save:
        profile.save(save)
        lines.append(f"saved to {save}")
    return profile.to_dict() | {"plot": plot}, lines
