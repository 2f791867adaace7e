"""Listening sockets and their holders, read from this machine's real /proc."""

from __future__ import annotations

import os
import socket
import sys

import pytest

from anet_core.util.procnet import holders, listening_sockets, proc_address

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def test_proc_addresses_are_read_in_host_byte_order() -> None:
    assert proc_address("0100007F:1F90") == ("127.0.0.1", 8080)
    assert proc_address("00000000000000000000000001000000:0050") == ("::1", 80)


def test_a_listening_socket_and_the_process_holding_it_are_found() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        port = listener.getsockname()[1]
        assert listening_sockets(port) == []  # bound, not yet listening
        listener.listen()
        [found] = listening_sockets(port)
        assert (found.address, found.port, found.uid) == ("127.0.0.1", port, os.getuid())
        assert holders([found]) == {os.getpid(): os.getuid()}
    assert listening_sockets(port) == []
