"""A graded kernel has no network: TCP, MPTCP and UDP to the machine all fail, and no port of the machine shows.

The grader talks to the kernel over Unix sockets in a folder bound into the sandbox (jupyter_client's "ipc"
transport), and bubblewrap gives the kernel a network namespace of its own (``--unshare-net``). Landlock's TCP
rule alone did not cover MPTCP or UDP (Landlock ABI 4 erratum), which let a kernel reach host services and
classmates' kernels (docs/instructors.md, section 6).
"""

import json
import socket
import threading

import nbformat
import pytest

from roofkit.grading import execute, jail

pytestmark = pytest.mark.sandbox

LIMITS = execute.Limits(notebook_s=60, cell_s=20, startup_s=60)
PROBE = '''
import json, socket
from IPython.display import display
said = {}
def attempt(name, make, action):
    try:
        s = make()
        s.settimeout(2)
        action(s)
        said[name] = "reached"
    except Exception as error:
        said[name] = type(error).__name__
attempt("tcp", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM), lambda s: s.connect(("127.0.0.1", TCP)))
attempt("mptcp", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262), lambda s: s.connect(("127.0.0.1", TCP)))
attempt("udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM),
        lambda s: (s.connect(("127.0.0.1", UDP)), s.send(b"out")))
attempt("outside", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM),
        lambda s: s.sendto(b"out", ("192.0.2.1", 53)))
try:
    said["listeners"] = sum(1 for line in open("/proc/net/tcp").read().splitlines()[1:] if line.split()[3] == "0A")
except OSError as error:
    said["listeners"] = type(error).__name__
display({"application/vnd.roofkit.answer+json": {"roofkit_answer": 1, "id": "probe", "answer": json.dumps(said)}},
        raw=True)
'''


@pytest.fixture
def host_services():
    """A TCP listener and a UDP socket on the machine's loopback, and what each received."""
    tcp, udp = socket.socket(), socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen()
    tcp.settimeout(0.2)
    udp.bind(("127.0.0.1", 0))
    udp.settimeout(0.2)
    received, stop = [], threading.Event()

    def serve():
        while not stop.is_set():
            for sock, take in ((tcp, lambda: tcp.accept()), (udp, lambda: udp.recvfrom(100))):
                try:
                    received.append(take())
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield tcp.getsockname()[1], udp.getsockname()[1], received
    stop.set()
    thread.join(5)
    tcp.close()
    udp.close()


def test_a_graded_kernel_reaches_no_socket_of_the_machine(host_services):
    plan = jail.choose("auto")
    tcp_port, udp_port, received = host_services
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        PROBE.replace("TCP", str(tcp_port)).replace("UDP", str(udp_port)))])
    run = execute.main(nb, limits=LIMITS, plan=plan)
    assert not run.failed and not run.errors, (run.failed, run.errors)
    said = json.loads(next(r["answer"] for _, r in run.records if r.get("id") == "probe"))
    assert "reached" not in (said["tcp"], said["mptcp"], said["outside"]), said  # no route out, no listener
    # a UDP datagram to 127.0.0.1 goes to the kernel's own loopback, where nothing listens: it may be "sent", but
    # it never arrives on the machine's side
    assert received == [], received
    assert said["listeners"] == 0, said  # no port of the machine's is visible: its own namespace has none
    assert plan.kind == "bubblewrap"


def test_output_a_kernel_sends_for_no_cell_is_counted_dropped_unparsed_and_stops_a_flood():
    """The red team's output bomb (messages whose parent is not the running cell, which the grader once parsed
    and never counted): each byte counts toward the flood limit, none is parsed, and the notebook stops."""
    limits = execute.Limits(notebook_s=60, cell_s=20, startup_s=60, output_bytes=200_000)
    record = ('from IPython.display import display\n'
              'display({"application/vnd.roofkit.answer+json": {"roofkit_answer": 1, "id": "q", "answer": 7}}, '
              'raw=True)')
    bomb = ('k = get_ipython().kernel\n'
            'parent = {"header": {"msg_id": "not-this-cell", "msg_type": "execute_request", "session": "x"}}\n'
            'for _ in range(40):\n'
            '    k.session.send(k.iopub_socket, "comm_msg", {"data": "[0]," * 50_000}, parent=parent)\n'
            'import time; time.sleep(5)')
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(record), nbformat.v4.new_code_cell(bomb),
                                         nbformat.v4.new_code_cell(record.replace('"q"', '"after"'))])
    run = execute.main(nb, limits=limits, plan=jail.choose("auto"))
    assert [r["id"] for _, r in run.records] == ["q"]  # the answer before the bomb is kept
    assert run.stopped and "printed more than" in run.stopped and run.stopped_at == 1, run.stopped
    assert run.output_bytes < limits.output_bytes  # none of it counted as the cell's own output: never parsed


@pytest.mark.parametrize("mode", ["auto", "none"])
def test_a_long_temporary_folder_still_holds_the_kernels_sockets(tmp_path, monkeypatch, mode):
    """A Unix socket's path is at most 107 bytes: the sockets live in a short folder whatever TMPDIR is."""
    import tempfile

    long = tmp_path / ("t" * 60) / ("u" * 60)
    long.mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(long))
    record = ('from IPython.display import display\n'
              'display({"application/vnd.roofkit.answer+json": {"roofkit_answer": 1, "id": "q", "answer": 7}}, '
              'raw=True)')
    run = execute.main(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(record)]),
                       limits=execute.Limits(notebook_s=60, cell_s=20, startup_s=60, sandbox=mode),
                       plan=jail.choose(mode))
    assert run.failed is None and [r["id"] for _, r in run.records] == ["q"], (run.failed, run.stopped)
