"""The network guard is on for the whole test session, subprocesses included."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from gnuq_core.repro.netguard import NetworkBlocked


def test_non_local_connection_is_refused_in_process() -> None:
    with socket.socket() as s, pytest.raises(NetworkBlocked, match="203.0.113.1"):
        s.connect(("203.0.113.1", 443))


def test_loopback_is_allowed() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        with socket.socket() as client:
            client.connect(server.getsockname())


@pytest.mark.subprocess
def test_guard_reaches_subprocesses() -> None:
    code = "import socket; s = socket.socket(); s.connect(('203.0.113.1', 443))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "NetworkBlocked" in out.stderr
    assert os.environ["GNUQ_BLOCK_NETWORK"] == "1"
