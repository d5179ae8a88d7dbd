"""The local stack's start checks: a port held only by closed connections is free."""

from __future__ import annotations

import socket

import pytest

from nemo_ops.dev import DevStackError, _check_ports_free
from nemo_ops.service_processes import Ports
from nemo_testing.ports import free_port


def _ports(context: int) -> Ports:
    return Ports(context, free_port(), free_port(), free_port())


def test_a_port_left_in_time_wait_by_a_stopped_server_is_free() -> None:
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        accepted, _ = listener.accept()
        accepted.close()  # the server side closes first: its port enters TIME_WAIT
        client.close()
    _check_ports_free(_ports(port))


def test_a_port_with_a_listener_is_refused() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with pytest.raises(DevStackError, match=f"port {port} is in use"):
            _check_ports_free(_ports(port))
