"""Multi-node for real: two `migrate launch --nnodes 2` launchers on this machine, one process
each, rendezvous (c10d) on 127.0.0.1, train scripts/two_nodes.py.

The run must equal the same program on 1 node x 2 processes (every rank's losses and final
weights), and when one node dies or its process fails, the other node's launcher must exit
non-zero, naming the failing rank, within bounded time. Node 0 starts first, so its launcher
hosts the rendezvous store (as the head node does); when that node dies, torchrun's agent
on the other node stops with its own error: the test asks for a bounded non-zero exit then.
"""

import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
import torch
from conftest import SCRIPTS, _env, check, read_json, run_migrate_launch

pytestmark = pytest.mark.slow

NODE_TIMEOUT_S = 240  # generous: the shared 2-core machine; a hang would exceed it


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_listener(port: int) -> None:
    deadline = time.monotonic() + NODE_TIMEOUT_S
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    pytest.fail(f"node 0 never listened on port {port}")


def launch_two_nodes(out, *script_args: str) -> list[tuple[int, str, float]]:
    """Both launchers, started together; (exit code, output, seconds to exit) of each node."""
    port = free_port()
    nodes = []
    for node_rank in (0, 1):
        command = [
            sys.executable,
            "-m",
            "migrator",
            "launch",
            "--nnodes",
            "2",
            "--node-rank",
            str(node_rank),
            "--rdzv-endpoint",
            f"127.0.0.1:{port}",
            "--nproc",
            "1",
            str(SCRIPTS / "two_nodes.py"),
            str(out),
            *script_args,
        ]
        nodes.append(
            subprocess.Popen(
                command,
                env=_env({"NODE_TAG": str(node_rank)}),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,  # its own process group: killed as a whole if stuck
            )
        )
        if node_rank == 0:
            wait_for_listener(port)  # node 0 hosts the rendezvous store
    started = time.monotonic()
    outputs = [[] for _ in nodes]
    readers = [
        threading.Thread(target=lambda node=node, lines=lines: lines.extend(node.stdout))
        for node, lines in zip(nodes, outputs)
    ]
    for reader in readers:
        reader.start()
    exits = [None, None]
    while None in exits and time.monotonic() - started < NODE_TIMEOUT_S:
        for index, node in enumerate(nodes):
            if exits[index] is None and node.poll() is not None:
                exits[index] = time.monotonic() - started
        time.sleep(0.1)
    if None in exits:
        for node in nodes:
            os.killpg(node.pid, signal.SIGKILL)
        pytest.fail(f"a node did not exit within {NODE_TIMEOUT_S} s (hang)")
    for reader in readers:
        reader.join()
    return [
        (node.returncode, "".join(lines), seconds)
        for node, lines, seconds in zip(nodes, outputs, exits)
    ]


@pytest.fixture(scope="module")
def one_node(tmp_path_factory):
    out = tmp_path_factory.mktemp("one_node")
    check(run_migrate_launch("two_nodes.py", str(out), nproc=2))
    return [read_json(out / f"rank{rank}.json") for rank in (0, 1)]


def test_two_nodes_train_exactly_as_one_node_with_two_processes(tmp_path, one_node):
    for code, output, _ in launch_two_nodes(tmp_path):
        assert code == 0, output[-3000:]
    two_nodes = [read_json(tmp_path / f"rank{rank}.json") for rank in (0, 1)]
    assert sorted(record["node"] for record in two_nodes) == ["0", "1"]  # one rank per node
    assert [record["node"] for record in one_node] == ["0", "0"]
    for ours, reference in zip(two_nodes, one_node):
        assert len(ours["losses"]) == 18
        assert ours["losses"] == pytest.approx(reference["losses"], rel=1e-6, abs=1e-7)
        for name, value in reference["weights"].items():
            mine = torch.tensor(ours["weights"][name])
            torch.testing.assert_close(mine, torch.tensor(value), rtol=1e-6, atol=1e-7)
    assert two_nodes[0]["weights"] == two_nodes[1]["weights"]  # DDP kept the nodes in step


def failing_and_survivor(nodes):
    failing = [node for node in nodes if " stops at step 3" in node[1]]
    survivor = [node for node in nodes if node not in failing]
    assert len(failing) == len(survivor) == 1
    rank = int(failing[0][1].split(" stops at step 3")[0].rsplit("rank ", 1)[1])
    return failing[0], survivor[0], rank


@pytest.mark.parametrize(
    "how, named",
    [
        ("die", "rank {rank} stopped answering (its node died, or it was killed)"),
        ("raise", "rank {rank} failed: RuntimeError: rank {rank} gave up at step 3"),
    ],
)
def test_a_failing_node_makes_the_other_exit_naming_the_failing_rank(tmp_path, how, named):
    nodes = launch_two_nodes(tmp_path, "--fail-node", "1", "--fail-step", "3", "--how", how)
    assert all(code != 0 for code, _, _ in nodes), [code for code, _, _ in nodes]
    failing, (_, output, survivor_exit), rank = failing_and_survivor(nodes)
    assert named.format(rank=rank) in output, output[-3000:]
    assert f"rank {1 - rank} lost its" in output
    # bounded: a short roll call through the launcher's store, not a collective's timeout
    assert survivor_exit - failing[2] < 60
    assert not list(tmp_path.glob("rank*.json"))  # nobody trained on alone


def test_when_the_node_hosting_the_rendezvous_dies_the_other_still_exits(tmp_path):
    nodes = launch_two_nodes(tmp_path, "--fail-node", "0", "--fail-step", "3", "--how", "die")
    failing, (code, output, survivor_exit), _ = failing_and_survivor(nodes)
    assert code != 0 and survivor_exit - failing[2] < 60, output[-3000:]
    assert not list(tmp_path.glob("rank*.json"))
