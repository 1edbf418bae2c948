"""roofkit measure times layers as training runs them (forward, and forward plus backward), on a fake CUDA device
whose clock charges every kernel a known cost, and the step model's backward is held against what it measured.

No GPU is needed: the fake PyTorch of test_measure.py gains autograd (a tape of the forward's kernels, replayed
by ``backward()`` with the costs a real backward has: two GEMMs per GEMM, 2.5x the attention FLOPs, twice the
bytes of an elementwise op)."""

from __future__ import annotations

import contextlib
import sys

import pytest

import test_measure as tm
from roofkit.perf import steptime
from roofkit.errors import InvalidValue
from roofkit.measure import gpu, layers


class TapeGPU(tm.FakeGPU):
    """The fake device, recording each kernel of a forward pass for its backward."""

    def __init__(self):
        super().__init__()
        self.tape, self.recording = [], True

    def kernel(self, flops, nbytes, kind="elementwise"):
        super().kernel(flops, nbytes)
        if self.recording:
            self.tape.append((kind, flops, nbytes))

    def backward(self):
        """Replay the tape as a backward pass, charging what a real one costs, and clear it."""
        tape, self.tape, self.recording = self.tape, [], False
        for kind, flops, nbytes in reversed(tape):
            if kind == "gemm":  # the input's gradient and the weight's
                super().kernel(flops, nbytes)
                super().kernel(flops, nbytes)
            elif kind == "attention":
                super().kernel(2.5 * flops, 2 * nbytes)
            else:
                super().kernel(flops, 2 * nbytes)
        self.recording = True


class AutogradTensor(tm.FakeTensor):
    def __matmul__(self, other):
        *batch, m, k = self.shape
        n = other.shape[-1]
        out = self._new((*batch, m, n))
        rows = out.nbytes / out.dtype.itemsize / n
        self.gpu.kernel(2 * rows * n * k, self.nbytes + other.nbytes + out.nbytes, "gemm")
        return out

    def _new(self, shape, dtype=None):
        return AutogradTensor(self.gpu, shape, dtype or self.dtype)

    def requires_grad_(self):
        return self

    def split(self, sizes, dim=-1):
        return [self._new((*self.shape[:-1], s)) for s in sizes]

    def view(self, *shape):
        return self._new(shape)

    reshape = view

    def transpose(self, a, b):
        shape = list(self.shape)
        shape[a], shape[b] = shape[b], shape[a]
        return self._new(shape)

    def sum(self):
        self.gpu.kernel(self.nbytes / self.dtype.itemsize, self.nbytes)
        return self._new((1,))

    def backward(self):
        self.gpu.backward()


class AutogradTorch(tm.FakeTorch):
    def __init__(self, device):
        super().__init__(device)
        fake = self
        self.nn.functional.scaled_dot_product_attention = \
            lambda q, k, v, is_causal=False, enable_gqa=False: fake._sdpa(q, k, v, is_causal)

    def _make(self, size, dtype):
        shape = size[0] if len(size) == 1 and isinstance(size[0], tuple) else size
        return AutogradTensor(self.gpu, shape, dtype or self.float32)

    def randn(self, *size, device=None, dtype=None):
        return self._make(size, dtype)

    empty = zeros = ones = randn

    def _sdpa(self, q, k, v, causal=False):
        B, H, s, d = q.shape
        t = k.shape[2]
        out = q._new(q.shape)
        pairs = s * (s + 1) / 2 if causal else s * t
        self.gpu.kernel(4 * B * H * pairs * d, q.nbytes + k.nbytes + v.nbytes + out.nbytes, "attention")
        return out

    def no_grad(self):
        gpu = self.gpu

        @contextlib.contextmanager
        def off():
            gpu.recording = False
            try:
                yield
            finally:
                gpu.recording = True
        return off()


@pytest.fixture
def fake_training_cuda(monkeypatch):
    device = TapeGPU()
    monkeypatch.setitem(sys.modules, "torch", AutogradTorch(device))
    monkeypatch.setattr(gpu.importlib.util, "find_spec", lambda name, *a: object())
    monkeypatch.setattr(gpu, "_driver_present", lambda: True)
    return device


def test_measure_times_layers_forward_and_backward(fake_training_cuda):
    result = gpu.measure_gpu(quick=True)
    training = result.layers["training"]
    assert [(c["model"], c["batch"], c["seq"]) for c in training] == list(layers.TRAINING_SET_QUICK)
    for case in training:
        assert case["forward_backward_s"] > 2 * case["forward_s"]  # a backward costs about twice a forward
    data = layers.load_layers(result.layers | {"roofs": {"peak_flops_per_s": result.peak_flops_per_s,
                                                         "bandwidth_bytes_per_s": result.bandwidth_bytes_per_s}})
    assert data.training and data.training[0].backward_s > 0


def test_the_training_cases_travel_with_layers_json(fake_training_cuda, tmp_path):
    result = gpu.measure_gpu(quick=True)
    data = layers.load_layers(result.layers)
    path = data.save(tmp_path / "layers.json")
    again = layers.load_layers(path)
    assert again.training == data.training


def test_the_step_model_s_backward_matches_what_the_fake_gpu_measured(fake_training_cuda):
    """The fake charges each kernel FLOOR + its roofline time, and a backward as a real one: the step model,
    calibrated on the same run's inference layers, must land on the measured forward and backward."""
    result = gpu.measure_gpu(quick=True)
    data = layers.load_layers(result.layers)
    rows = steptime.compare_training(data)
    assert rows
    for row in rows:
        assert row["forward_ratio"] == pytest.approx(1, abs=0.15)
        assert row["backward_ratio"] == pytest.approx(1, abs=0.15)


def test_the_shipped_h200_dataset_has_no_training_cases_yet():
    assert steptime.compare_training() == []


def test_a_malformed_training_case_is_one_clear_error():
    data = layers.shipped("layers.json") | {"training": [{"model": "llama-3-8b", "forward_s": 1.0}]}
    with pytest.raises(InvalidValue, match="lacks"):
        layers.load_layers(data)
    data["training"] = [{"model": "llama-3-8b", "d": 4096, "H": 32, "KV": 8, "ff": 14336, "head_dim": 128,
                         "batch": 1, "seq": 2048, "forward_s": -1, "forward_backward_s": 1.0}]
    with pytest.raises(InvalidValue, match="forward_s"):
        layers.load_layers(data)
