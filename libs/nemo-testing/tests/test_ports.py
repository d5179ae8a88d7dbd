"""Ports handed to test servers stay theirs until they bind them."""

from __future__ import annotations

import socket

from nemo_testing import ports
from nemo_testing.ports import free_port


def test_ports_come_from_below_the_ephemeral_range() -> None:
    first_ephemeral, _ = ports._ephemeral_range()
    for _ in range(300):
        assert free_port() < first_ephemeral


def test_no_port_is_handed_out_twice() -> None:
    handed = [free_port() for _ in range(500)]
    assert len(set(handed)) == len(handed)


def test_a_port_held_by_a_listener_is_not_handed_out() -> None:
    listeners = []
    try:
        for _ in range(50):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", free_port()))
            sock.listen()
            listeners.append(sock)
        held = {sock.getsockname()[1] for sock in listeners}
        ports._handed_out.difference_update(held)
        for _ in range(2000):
            assert free_port() not in held
    finally:
        for sock in listeners:
            sock.close()


def test_outgoing_connections_never_take_a_handed_out_port() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(256)
        chosen = {free_port() for _ in range(200)}
        clients = []
        try:
            for _ in range(100):
                client = socket.create_connection(server.getsockname())
                clients.append(client)
            taken = {client.getsockname()[1] for client in clients}
        finally:
            for client in clients:
                client.close()
        assert not chosen & taken
