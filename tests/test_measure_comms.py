"""roofkit.measure.comms: the timing loop recovers a known α and β, the PyTorch and NCCL paths call what
they should (through a fake torch), the socket ring sums correctly, and a real run works here."""

import json
import math
import socket
import threading
import types

import numpy as np
import pytest

from roofkit import cli
from roofkit.perf import comms
from roofkit.errors import InvalidValue, RoofkitError
from roofkit.measure import comms as mc


# --- a fake clock and a fake transport: the loop and the fit recover what the fake charges ----------

class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class FakeTransport:
    """Charges α + S/β per message and the ring's time per all-reduce, on a fake clock."""

    def __init__(self, clock, rank=0, world=2, alpha=20e-6, beta=2e9):
        self.clock, self.rank, self.world, self.alpha, self.beta = clock, rank, world, alpha, beta
        self.calls = []

    def buffer(self, nbytes):
        return np.zeros(max(1, nbytes // 4), dtype=np.float32)

    def send(self, buf, peer):
        self.calls.append(("send", peer))
        self.clock.now += comms.time("p2p", buf.nbytes, 2, self.alpha, self.beta)

    def recv(self, buf, peer):
        self.calls.append(("recv", peer))
        self.clock.now += comms.time("p2p", buf.nbytes, 2, self.alpha, self.beta)

    def all_reduce(self, buf):
        self.calls.append(("all_reduce",))
        self.clock.now += comms.time("all-reduce", buf.nbytes, self.world, self.alpha, self.beta)

    def barrier(self):
        self.clock.now += 1.0  # a barrier's cost must not leak into the timings

    def sync(self):
        pass


@pytest.mark.parametrize("world", [2, 4])
def test_the_loop_and_the_fit_recover_alpha_and_beta(world):
    clock = Clock()
    transport = FakeTransport(clock, world=world)
    sizes = [2**k for k in range(4, 26, 3)]
    timed = mc.run_rank(transport, sizes, repeats=3, timer=clock)
    p2p = comms.fit(sizes, timed["p2p"], "p2p")
    ar = comms.fit(sizes, timed["all_reduce"], "all-reduce", gpus=world)
    for fit in (p2p, ar):
        assert fit.alpha_s == pytest.approx(20e-6) and fit.bandwidth_bytes_per_s == pytest.approx(2e9)
        assert fit.max_error < 1e-9
    assert ("send", 1) in transport.calls and ("recv", 1) in transport.calls


def test_rank_1_answers_and_other_ranks_only_reduce():
    clock = Clock()
    one, two = FakeTransport(clock, rank=1, world=3), FakeTransport(clock, rank=2, world=3)
    mc.run_rank(one, [8, 64], repeats=1, timer=clock)
    mc.run_rank(two, [8, 64], repeats=1, timer=clock)
    assert one.calls[1:3] == [("recv", 0), ("send", 0)]
    assert {c[0] for c in two.calls} == {"all_reduce"}


# --- a fake torch: the gloo and NCCL paths ----------------------------------------------------------

class FakeTensor:
    def __init__(self, n, device):
        self.n, self.device = n, device

    @property
    def nbytes(self):
        return 4 * self.n


def fake_torch(gpus=2, nccl=True, distributed=True):
    clock = Clock()
    log = []

    def charge(tensor, collective="p2p", world=2):
        clock.now += comms.time(collective, tensor.nbytes, world, 5e-6, 4e11)

    dist = types.SimpleNamespace(
        is_available=lambda: distributed, is_nccl_available=lambda: nccl, is_gloo_available=lambda: True,
        init_process_group=lambda backend, **kw: log.append(("init", backend, kw["rank"], kw["world_size"])),
        send=lambda t, peer: (log.append(("send", t.device, peer)), charge(t)),
        recv=lambda t, peer: (log.append(("recv", t.device, peer)), charge(t)),
        all_reduce=lambda t: (log.append(("all_reduce", t.device)), charge(t, "all-reduce", 2)),
        barrier=lambda **kw: log.append(("barrier", kw.get("device_ids"))),
        destroy_process_group=lambda: log.append(("destroy",)))
    cuda = types.SimpleNamespace(is_available=lambda: gpus > 0, device_count=lambda: gpus,
                                 set_device=lambda i: log.append(("set_device", i)),
                                 synchronize=lambda: log.append(("synchronize",)))
    torch = types.SimpleNamespace(distributed=dist, cuda=cuda, float32="float32",
                                  ones=lambda n, dtype, device: FakeTensor(n, device))
    return torch, clock, log


@pytest.mark.parametrize("gpus, nccl, distributed, expected", [
    (2, True, True, "nccl"), (8, True, True, "nccl"), (1, True, True, "gloo"), (0, False, True, "gloo"),
    (2, False, True, "gloo"), (2, True, False, "socket")])
def test_backend_choice(gpus, nccl, distributed, expected):
    torch, _, _ = fake_torch(gpus, nccl, distributed)
    assert mc.choose_backend("auto", torch=torch)[0] == expected


def test_backend_choice_errors():
    torch, _, _ = fake_torch(gpus=1)
    with pytest.raises(InvalidValue, match="needs at least 2 CUDA GPUs and NCCL; this machine has 1"):
        mc.choose_backend("nccl", torch=torch)
    with pytest.raises(InvalidValue, match="unknown backend 'mpi'; expected one of: auto, socket, gloo, nccl"):
        mc.choose_backend("mpi")
    assert mc.choose_backend("socket")[0] == "socket"


def test_the_nccl_path_measures_on_the_gpus():
    torch, clock, log = fake_torch(gpus=2)
    transport = mc.TorchTransport(1, 2, "nccl", 29500, torch=torch)
    assert log[:2] == [("set_device", 1), ("init", "nccl", 1, 2)] and transport.device == "cuda:1"
    timed = mc.run_rank(transport, [2**k for k in range(4, 24, 4)], repeats=2, timer=clock)
    transport.close()
    assert ("recv", "cuda:1", 0) in log and ("send", "cuda:1", 0) in log and ("all_reduce", "cuda:1") in log
    assert ("barrier", [1]) in log and ("synchronize",) in log and log[-1] == ("destroy",)
    assert len(timed["all_reduce"]) == 5


def test_the_gloo_path_stays_on_the_cpu():
    torch, clock, log = fake_torch(gpus=0)
    transport = mc.TorchTransport(0, 2, "gloo", 29500, torch=torch)
    timed = mc.run_rank(transport, [2**k for k in range(4, 24, 4)], repeats=2, timer=clock)
    assert transport.device == "cpu" and ("set_device", 0) not in log and ("synchronize",) not in log
    fit = comms.fit([2**k for k in range(4, 24, 4)], timed["p2p"], "p2p")
    assert fit.alpha_s == pytest.approx(5e-6) and fit.bandwidth_bytes_per_s == pytest.approx(4e11)


# --- the socket ring: correct sums (numpy is the oracle) ---------------------------------------------

@pytest.mark.parametrize("world, n", [(2, 1), (2, 1001), (3, 5000), (4, 2)])
def test_socket_ring_all_reduce_sums(world, n):
    pairs = [socket.socketpair() for _ in range(world)]  # pairs[r]: r's right end, (r+1)'s left end
    transports = [mc.SocketTransport(r, world, left=pairs[(r - 1) % world][1], right=pairs[r][0])
                  for r in range(world)]
    rng = np.random.default_rng(world * n)
    data = [rng.standard_normal(n).astype(np.float32) for _ in range(world)]
    expected = np.sum(data, axis=0)
    errors = []

    def work(r):
        try:
            transports[r].barrier()
            transports[r].all_reduce(data[r])
        except Exception as error:  # noqa: BLE001
            errors.append(error)

    threads = [threading.Thread(target=work, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    for t in transports:
        t.close()
    assert not errors
    for r in range(world):
        np.testing.assert_allclose(data[r], expected, rtol=1e-5, atol=1e-5)


# --- a real run on this machine -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def measured():
    return mc.measure_comms(quick=True, sizes=(8, 512, 32768, 2**20), repeats=3, backend="socket")


def test_a_real_measurement_is_plausible(measured):
    assert measured.backend == "socket" and measured.processes == 2
    for fit in (measured.p2p, measured.all_reduce):
        assert 0 <= fit.alpha_s < 0.01  # loopback: microseconds, not tens of milliseconds
        assert 1e6 < fit.bandwidth_bytes_per_s <= math.inf
        assert all(t > 0 for t in fit.times) and math.isfinite(fit.median_error)
    data = measured.to_dict()
    assert {"alpha_s", "beta_bytes_per_s", "p2p", "all_reduce", "backend"} <= set(data)
    assert "point-to-point" in measured.report() and "all-reduce" in measured.report()


def test_the_plot_shows_measurements_and_the_model(measured, tmp_path):
    fig = measured.plot(tmp_path / "comms.png")
    ax = fig.axes[0]
    gids = [line.get_gid() for line in ax.lines]
    assert gids.count("measured") == 2 and gids.count("model") == 2
    assert (tmp_path / "comms.png").stat().st_size > 10_000
    for line, fit in zip([x for x in ax.lines if x.get_gid() == "model"], (measured.p2p, measured.all_reduce)):
        S, t = line.get_data()  # the model line is T = steps·α + f·S/β of the fit, size by size
        for size, seconds in list(zip(S, t))[::40]:
            assert seconds == pytest.approx(comms.time(fit.collective, size, fit.gpus, fit.alpha_s,
                                                       fit.bandwidth_bytes_per_s))


class _Dead:
    exitcode = 1


class _Starting:
    exitcode = None


def test_a_worker_that_dies_before_it_starts_fails_at_once():
    import multiprocessing
    import time

    parent, child = multiprocessing.Pipe()
    started = time.monotonic()
    with pytest.raises(mc.MeasurementFailed, match="exited with code 1 before it started"):
        mc._poll(parent, 60, 0, _Dead())  # without the liveness check this waited the full 60 s
    assert time.monotonic() - started < 5
    with pytest.raises(mc.MeasurementFailed, match="did not start within 0.3 s"):
        mc._poll(parent, 0.3, 1, _Starting())
    child.send(4242)
    assert mc._poll(parent, 1, 0, _Starting()) == 4242


def test_bad_arguments():
    with pytest.raises(InvalidValue, match="processes must be a whole number of at least 2"):
        mc.measure_comms(processes=1)
    with pytest.raises(InvalidValue, match="at least two different sizes"):
        mc.measure_comms(sizes=(64, 64))


@pytest.mark.torch
def test_gloo_for_real():
    pytest.importorskip("torch")
    profile = mc.measure_comms(quick=True, sizes=(8, 4096, 2**18), repeats=2, backend="gloo")
    assert profile.backend == "gloo" and profile.p2p.bandwidth_bytes_per_s > 1e6


def test_cli_measure_comms(capsys, tmp_path):
    plot, saved = tmp_path / "c.png", tmp_path / "c.json"
    code = cli.main(["measure", "--comms", str(plot), "--quick", "--save", str(saved), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads(out)
    assert data["plot"] == str(plot) and plot.exists() and json.loads(saved.read_text())["alpha_s"] == data["alpha_s"]
    assert data["alpha_s"] > 0 and data["p2p"]["sizes"][0] == mc.QUICK_SIZES[0]
    code = cli.main(["measure", "--comms", str(tmp_path / "missing" / "c.png")])
    out, err = capsys.readouterr()
    assert code == 2 and "--comms: the folder of" in err and len(err.strip().splitlines()) == 1


def test_measurement_failures_are_roofkit_errors():
    assert issubclass(mc.MeasurementFailed, RoofkitError) and issubclass(mc.MeasurementFailed, RuntimeError)
