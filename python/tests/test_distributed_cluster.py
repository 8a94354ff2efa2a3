"""tcpdx-ray against a Ray cluster of its own: ``ray start --head`` on a free port, in a
temporary directory of its own (so neither ``ray.init`` elsewhere nor this test can meet
another cluster of the machine), joined by the command ``tcpdx-ray`` in a process of its
own with ``--address auto`` (Ray's discovery reads ``RAY_ADDRESS`` first) and with
``--address ray://`` (the head's Ray Client server). The cluster is stopped at the end by
signalling its ``ray start --block`` process (``ray stop`` would stop every Ray of the
machine); a process left behind, found by the temporary directory in its command line, is
killed by its pid.

Needs the tcpdx binary to compare with ($TCPDX_BIN, else built by cargo).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from test_distributed import LAB, binary, ring

# Under load (shared CI machines) a head takes a while to come up.
START_TIMEOUT_S = 180


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pids_of(temp: str) -> list[int]:
    """The processes whose command line names the cluster's temporary directory."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            cmdline = (d / "cmdline").read_bytes()
        except OSError:
            continue
        if temp.encode() in cmdline:
            found.append(int(d.name))
    return found


# The cluster's own token (Ray enables token authentication for `ray start` by default,
# with ~/.ray/auth_token, which other Rays of the machine may share or rewrite).
TOKEN = secrets.token_hex(32)


def clean_env() -> dict:
    """This process's environment without any Ray address or token, with the cluster's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_ADDRESS", "RAY_AUTH"))}
    env["RAY_AUTH_MODE"] = "token"
    env["RAY_AUTH_TOKEN"] = TOKEN
    return env


@pytest.fixture(scope="module")
def head():
    ray = Path(sys.executable).with_name("ray")
    assert ray.exists(), f"ray's command is installed beside {sys.executable}"
    # Short: Ray's socket paths live under it and a Unix socket path has 107 bytes at most.
    temp = tempfile.mkdtemp(prefix="tcpdx-ray-", dir="/tmp")
    port, client_port = free_port(), free_port()
    log = open(Path(temp) / "ray-start.log", "w")
    proc = subprocess.Popen(
        [
            str(ray),
            "start",
            "--head",
            f"--port={port}",
            f"--ray-client-server-port={client_port}",
            "--num-cpus=2",
            f"--temp-dir={temp}",
            "--include-dashboard=false",
            "--disable-usage-stats",
            "--block",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=clean_env(),
    )
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        # Up once `ray start` wrote the address into the directory's address file.
        while not (Path(temp) / "ray_current_cluster").exists():
            assert proc.poll() is None, (Path(temp) / "ray-start.log").read_text()
            assert time.monotonic() < deadline, "ray start --head did not come up"
            time.sleep(0.5)
        yield {"address": address, "client": f"ray://127.0.0.1:{client_port}", "temp": temp}
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        # Whatever the signal left of this cluster (and only of it).
        time.sleep(1)
        for pid in pids_of(temp):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        log.close()
        shutil.rmtree(temp, ignore_errors=True)


def tcpdx_ray(address_env: str | None, *args: str) -> subprocess.CompletedProcess:
    """The installed command ``tcpdx-ray``, in a process of its own."""
    env = clean_env()
    env["TCPDX_BIN"] = binary()
    if address_env is not None:
        env["RAY_ADDRESS"] = address_env
    cmd = [str(Path(sys.executable).with_name("tcpdx-ray")), *args]
    return subprocess.run(cmd, check=False, capture_output=True, text=True, env=env, timeout=600)


def tcpdx(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([binary(), *args], check=False, capture_output=True, text=True)


def test_address_auto_finds_the_cluster_in_ray_address(head, tmp_path):
    whole = LAB / "case001_reorder_behind" / "client.pcap.gz"
    files = ring(whole, tmp_path, 200)
    want = tcpdx("diagnose", "--json", str(whole))
    assert want.returncode == 0, want.stderr
    got = tcpdx_ray(head["address"], "diagnose", "--address", "auto", "--json", *files)
    assert got.returncode == 0, got.stderr
    assert got.stdout == want.stdout
    # It ran on that cluster: its session directory holds the driver's job logs.
    assert any(Path(head["temp"]).glob("session_*/logs/*driver*")), "no driver log"
