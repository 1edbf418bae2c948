"""How long an explorer takes to follow a slider or any other control, measured in a real kernel (not a pass/fail test).

    python benchmarks/explorers.py                 # every explorer: 50 slider changes, then every other control
    python benchmarks/explorers.py roofline -n 20  # one explorer, fewer slider changes
    python benchmarks/explorers.py --cycles 1      # each dropdown once round its options (default: twice)
    python benchmarks/explorers.py --code /tmp/old # another roofkit (e.g. `git archive REV roofkit | tar -x`)

Target (issue 22): median under 50 ms, worst under 150 ms per change, for every control: sliders, dropdowns,
checkboxes and text boxes alike.

How: a real IPython kernel is started with jupyter_client (the kernel JupyterLab
would start; over IPC sockets), the explorer is built in it as the lesson builds it, and then this
script plays the frontend: for each change it sends the ``comm_msg`` JupyterLab
sends when a slider moves (``{"method": "update", "state": {"index": k}}``, or a
new ``value`` for the MFU slider and the format explorer's text box) and waits
until the kernel has handled it and gone idle again, collecting every message the
kernel sends back (the label's HTML, the new picture, the echo of the value).

Per explorer it prints, over the changes:

* ``wall``: from sending the change to the kernel's idle status, on this side of
  the socket: the full update, including encoding what the frontend receives and
  sending it (the browser's own drawing of the new picture is not counted);
* ``kernel``: wall time inside the kernel's handler for that message;
* ``cpu``: the kernel process's CPU time for the handler (every thread), which a
  busy shared machine inflates much less than wall time;
* ``kB/change``: what the frontend receives per change (JSON and binary buffers).

The moves are what a hand does: each slider swept left to its end and back to
the right from where the lesson starts it (a triangle wave, one step at a time),
the explorer's sliders taking turns. Then every other control (:data:`CONTROLS`)
is changed in turn, each ``--cycles`` times round: a dropdown visits every
option from the lesson's and comes back to it (every accelerator, every model),
a checkbox is ticked and unticked, a text box gets typed values (some that
roofkit cannot read). After the explorers' lines comes a table, one row per
control of each explorer (sliders included), with its median and worst kernel,
wall and CPU times; the target is checked on the kernel time. Each explorer
gets a fresh kernel, so no cache is warm from another explorer: the first time
round, every option computes its model and draws its key layer (``--cycles 1``
measures only that), the second time round finds both kept.
"""

from __future__ import annotations

import argparse
import json
import queue
import statistics
import subprocess
import sys
import time

# what each lesson shows (lessons/03, 05, 08, 13, 14), and the inputs a person moves
EXPLORERS = {
    "roofline": ('from roofkit.explore import roofline_explorer\n'
                 'x = roofline_explorer("h100", "bf16", "gemm", 4096)', ["size"]),
    "formats": ("from roofkit.explore import format_explorer\nx = format_explorer(0.1)", ["text"]),
    "training": ("from roofkit.explore import training_calculator\nx = training_calculator()", ["mfu"]),
    "serving": ('from roofkit.explore import serving_explorer\n'
                'x = serving_explorer("llama-3-70b", "h100", gpus=8, context=8192, batch=64)', ["context", "batch"]),
    "parallel": ('from roofkit.explore import parallel_explorer\n'
                 'x = parallel_explorer("llama-3-70b", "h100", gpus=1024, tp=8, pp=4, zero=1)',
                 ["gpus", "tp", "pp", "zero", "global_batch_tokens"]),
}

# the controls that are not sliders, changed after the sliders (lesson 05's text box is the format explorer's slider)
CONTROLS = {
    "roofline": ["accelerator", "precision", "kernel"],
    "formats": [],
    "training": ["params", "tokens", "hw", "dtype", "gpus", "usd_per_gpu_hour"],
    "serving": ["model", "hw", "gpus", "weights_dtype", "kv_dtype"],
    "parallel": ["model", "hw", "recompute", "calibrated"],
}

# what is typed into a text box other than the format explorer's, once round (back to the lesson's value at the end)
_TYPED_INPUTS = {
    "params": ["7B", "405B", "1.5e11", "70X", "70B"],
    "tokens": ["2T", "300B", "15e12", "lots", "15T"],
    "gpus": ["1024", "16384", "0", "8192"],
    "usd_per_gpu_hour": ["$3.50", "1", "-2", "2.0"],
}

# installed in the kernel before the explorer is built: times every widget message's handler
_HOOK = """
import time as _t, ipywidgets as _w
_BENCH = []
_handle = _w.Widget._handle_msg
def _timed(self, msg):
    w0, c0 = _t.perf_counter(), _t.process_time()
    try:
        return _handle(self, msg)
    finally:
        _BENCH.append((msg["header"]["msg_id"], _t.perf_counter() - w0, _t.process_time() - c0))
_w.Widget._handle_msg = _timed
"""

# the inputs' model ids and where each one starts: {name: (model_id, kind, index or value, n options)}
_INPUTS = """
import json as _json
def _find(x, name):
    if name == "text" and hasattr(x, "text"):
        return x.text
    return x.inputs[name]
_out = {}
for _name in %r:
    _wid = _find(x, _name)
    if hasattr(_wid, "index") and hasattr(_wid, "options"):
        _out[_name] = (_wid.model_id, "index", _wid.index, len(_wid.options))
    elif isinstance(_wid.value, bool):
        _out[_name] = (_wid.model_id, "bool", _wid.value, None)
    else:
        _out[_name] = (_wid.model_id, "value", _wid.value, None)
print(_json.dumps(_out))
"""

_TYPED = ["0.1", "0.12", "0.125", "1", "1e", "1e9", "1e-", "1e-3", "65504", "65520", "65536", "3.14159",
          "2**-7", "2**-24", "1/3", "-6.5", "448", "449", "57344", "-0", "inf", "nan", "1e38", "3.4e38"]


def _triangle(start: int, count: int, moves: int) -> list[int]:
    """Indices a hand visits: from ``start`` one step at a time to 0, then to the end, then back, ..."""
    out, i, step = [], start, -1
    for _ in range(moves):
        if not 0 <= i + step < count:
            step = -step
        i += step
        out.append(i)
    return out


def _moves(inputs: dict, n: int) -> list[tuple[str, str, object]]:
    """(name, state key, new value) for ``n`` changes, the inputs taking turns in blocks."""
    names = list(inputs)
    share = [n // len(names) + (k < n % len(names)) for k in range(len(names))]
    plan = []
    for name, moves in zip(names, share):
        _, kind, start, count = inputs[name]
        if kind == "index":
            plan += [(name, "index", i) for i in _triangle(start, count, moves)]
        elif name == "text":
            plan += [(name, "value", _TYPED[k % len(_TYPED)]) for k in range(moves)]
        else:  # the MFU slider: 0.01 .. 1.0 in steps of 0.01
            plan += [(name, "value", (i + 1) / 100) for i in _triangle(round(start * 100) - 1, 100, moves)]
    return plan


def _rounds(inputs: dict, cycles: int) -> list[tuple[str, str, object]]:
    """(name, state key, new value) for every control of ``inputs``, one after the other, ``cycles`` times round.

    A dropdown visits each option once from the one it starts at and comes back to it; a checkbox is flipped
    twice (ticked and unticked, or the other way); a text box gets :data:`_TYPED_INPUTS`, ending on its value.
    """
    plan = []
    for name, (_, kind, start, count) in inputs.items():
        for _ in range(cycles):
            if kind == "index":
                plan += [(name, "index", (start + k) % count) for k in range(1, count + 1)]
            elif kind == "bool":
                plan += [(name, "value", not start), (name, "value", start)]
            else:
                plan += [(name, "value", typed) for typed in _TYPED_INPUTS[name]]
    return plan


class Kernel:
    def __init__(self, code: str | None = None, tries: int = 2):
        import os
        import tempfile

        from jupyter_client.manager import KernelManager

        env = dict(os.environ)
        if code:  # the roofkit in this folder, ahead of the installed one
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [code, env.get("PYTHONPATH")]))
        for attempt in range(tries):
            # IPC sockets: no TCP port to lose to another process between choosing it and binding it
            self.folder = tempfile.mkdtemp(prefix="roofkit-bench-")
            self.km = KernelManager(kernel_name="python3", transport="ipc", ip=os.path.join(self.folder, "kernel"))
            self.km.start_kernel(stderr=subprocess.DEVNULL, env=env)
            self.kc = self.km.client()
            self.kc.start_channels()
            try:
                self.kc.wait_for_ready(timeout=120)
                return
            except RuntimeError:
                self.close()
                if attempt == tries - 1:
                    raise

    def run(self, code: str, timeout: float = 300) -> str:
        msg_id = self.kc.execute(code, store_history=False)
        out, error = [], None
        while True:
            msg = self.kc.get_iopub_msg(timeout=timeout)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream":
                out.append(content["text"])
            elif kind == "error":
                error = "\n".join(content["traceback"])
            elif kind == "status" and content["execution_state"] == "idle":
                break
        if error:
            raise RuntimeError(error)
        return "".join(out)

    def change(self, model_id: str, key: str, value, timeout: float = 60) -> tuple[float, int, str]:
        """Send one frontend update; return (wall seconds to idle, bytes received back, message id)."""
        msg = self.kc.session.msg("comm_msg", {"comm_id": model_id,
                                               "data": {"method": "update", "state": {key: value},
                                                        "buffer_paths": []}})
        start = time.perf_counter()
        self.kc.shell_channel.send(msg)
        received = 0
        while True:
            try:
                reply = self.kc.get_iopub_msg(timeout=timeout)
            except queue.Empty:
                raise TimeoutError(f"no idle status within {timeout} s after a change") from None
            if reply["parent_header"].get("msg_id") != msg["header"]["msg_id"]:
                continue
            if reply["msg_type"] == "comm_msg":
                received += len(json.dumps(reply["content"])) + sum(len(b) for b in reply.get("buffers", []))
            elif reply["msg_type"] == "status" and reply["content"]["execution_state"] == "idle":
                return time.perf_counter() - start, received, msg["header"]["msg_id"]

    def close(self):
        import shutil

        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)
        shutil.rmtree(self.folder, ignore_errors=True)


def measure(name: str, n: int, code: str | None = None, cycles: int = 2) -> dict:
    """The explorer's slider changes (``wall``, ``kernel``, ``cpu``, ``bytes``: one entry per change) and
    ``controls``: for every input, sliders and other controls, its changes' {'wall', 'kernel', 'cpu'}."""
    setup, names = EXPLORERS[name]
    kernel = Kernel(code)
    try:
        kernel.run(_HOOK)
        start = time.perf_counter()
        kernel.run(setup + "\nNone")
        build = time.perf_counter() - start
        inputs = json.loads(kernel.run(_INPUTS % (names,)).strip().splitlines()[-1])
        others = json.loads(kernel.run(_INPUTS % (CONTROLS[name],)).strip().splitlines()[-1])
        moves = [(m, True) for m in _moves(inputs, n)] + [(m, False) for m in _rounds(others, cycles)]
        done = []  # (input name, slider?, wall, bytes, message id)
        for (input_name, key, value), slider in moves:
            model_id = (inputs if slider else others)[input_name][0]
            wall, size, msg_id = kernel.change(model_id, key, value)
            done.append((input_name, slider, wall, size, msg_id))
        inside = {m: (w, c) for m, w, c in json.loads(kernel.run(
            "import json as _j\nprint(_j.dumps(_BENCH))").strip().splitlines()[-1])}
    finally:
        kernel.close()
    sliders = [d for d in done if d[1] and d[4] in inside]
    controls = {}
    for input_name, _, wall, _, msg_id in done:
        if msg_id in inside:
            row = controls.setdefault(input_name, {"wall": [], "kernel": [], "cpu": []})
            row["wall"].append(wall), row["kernel"].append(inside[msg_id][0]), row["cpu"].append(inside[msg_id][1])
    return {"name": name, "n": len(sliders), "build_s": build, "wall": [d[2] for d in sliders],
            "kernel": [inside[d[4]][0] for d in sliders], "cpu": [inside[d[4]][1] for d in sliders],
            "bytes": [d[3] for d in sliders], "controls": controls}


def _ms(xs) -> str:
    return f"{statistics.median(xs) * 1e3:7.1f} {max(xs) * 1e3:7.1f}"


def _on_target(times) -> bool:
    return statistics.median(times) < 0.05 and max(times) < 0.15


def _control_rows(controls: dict) -> list[str]:
    """One line per input: how many changes, kernel and wall median/worst, and whether the kernel time is on target."""
    return [f"  {name:<20} {len(r['kernel']):>4} {_ms(r['kernel']):>17} {_ms(r['wall']):>15} {_ms(r['cpu']):>15}  "
            f"{'ok' if _on_target(r['kernel']) else 'OVER TARGET'}" for name, r in controls.items()]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("explorers", nargs="*", metavar="explorer",
                        help=f"which explorers: {', '.join(EXPLORERS)} (default: all)")
    parser.add_argument("-n", type=int, default=50, help="slider changes per explorer (default 50)")
    parser.add_argument("--cycles", type=int, default=2,
                        help="times round every dropdown, checkbox and text box (default 2; 0: sliders only)")
    parser.add_argument("--code", metavar="DIR", help="measure the roofkit package in DIR instead of the installed one")
    args = parser.parse_args(argv)
    names = args.explorers or list(EXPLORERS)
    unknown = [x for x in names if x not in EXPLORERS]
    if unknown:
        parser.error(f"unknown explorer {unknown[0]!r}; choose from {', '.join(EXPLORERS)}")
    print(f"{args.n} changes per explorer, each in a fresh kernel; times in ms (median, worst); "
          f"roofkit: {args.code or 'the installed one'}")
    print(f"{'explorer':<10} {'wall med/worst':>15} {'kernel med/worst':>17} {'cpu med/worst':>15} "
          f"{'kB/change':>9} {'build':>7}  verdict (wall: <50 median, <150 worst)")
    results = []
    for name in names:
        r = measure(name, args.n, args.code, args.cycles)
        results.append(r)
        verdict = "ok" if _on_target(r["wall"]) else "OVER TARGET"
        print(f"{name:<10} {_ms(r['wall']):>15} {_ms(r['kernel']):>17} {_ms(r['cpu']):>15} "
              f"{statistics.mean(r['bytes']) / 1e3:9.1f} {r['build_s']:6.2f}s  {verdict}", flush=True)
    print(f"\nper control, sliders included (dropdowns {args.cycles} times round every option, checkboxes flipped, "
          "text boxes typed); times in ms (median, worst)")
    print(f"  {'control':<20} {'n':>4} {'kernel med/worst':>17} {'wall med/worst':>15} {'cpu med/worst':>15}  "
          "verdict (kernel: <50 median, <150 worst)")
    for r in results:
        print(r["name"])
        print("\n".join(_control_rows(r["controls"])), flush=True)
    try:
        import os

        print(f"load average: {', '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    except OSError:
        pass


if __name__ == "__main__":
    sys.exit(main())
