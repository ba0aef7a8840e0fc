"""``python -m pydet.cli.tunnel MASTER TASK_ID``: ssh's ProxyCommand for ``det shell``. It
carries its stdin and stdout over a WebSocket to the master's ``/proxy/<task id>/``, which
carries them on to the shell's sshd: one connection to the master's one port, authenticated
by the user's session (the CLI's cached one, never a token on the command line).

Light on purpose, since ssh runs it for every connection: sockets, ``ssl`` and wsproto (what
the master's own WebSockets speak), a thread a direction.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import threading
from typing import Any

from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    RejectConnection,
    RejectData,
    Request,
    TextMessage,
)

from determined.common import client, credentials

_READ = 64 * 1024


class Tunnel:
    def __init__(self, sock: socket.socket, conn: WSConnection) -> None:
        self._sock = sock
        self._conn = conn
        self._lock = threading.Lock()
        self.closed = threading.Event()

    def send(self, event: Any) -> None:
        with self._lock:
            data = self._conn.send(event)
            self._sock.sendall(data)

    def upstream(self) -> None:
        """stdin to the WebSocket, until stdin ends."""
        try:
            while data := os.read(0, _READ):
                self.send(BytesMessage(data=data))
            self.send(CloseConnection(code=1000))
        except OSError:
            pass

    def downstream(self) -> None:
        """The WebSocket to stdout, until it closes."""
        try:
            while not self.closed.is_set():
                data = self._sock.recv(_READ)
                self._conn.receive_data(data or None)
                for event in self._conn.events():
                    if isinstance(event, BytesMessage):
                        os.write(1, bytes(event.data))
                    elif isinstance(event, TextMessage):
                        os.write(1, event.data.encode())
                    elif isinstance(event, Ping):
                        self.send(event.response())
                    elif isinstance(event, CloseConnection):
                        if self._conn.state.name != "CLOSED":
                            self.send(event.response())
                        self.closed.set()
                if not data:
                    self.closed.set()
        except OSError:
            self.closed.set()


def connect(master: str, task_id: str, token: str, cert_file: str | None) -> Tunnel:
    host, port = client.parse_address(master)
    sock: socket.socket = socket.create_connection((host, port), timeout=30)
    if client.uses_tls(master, cert_file):
        tls = client.tls_context(cert_file, alpn=("http/1.1",))
        sock = tls.wrap_socket(sock, server_hostname=host)
    sock.settimeout(None)
    conn = WSConnection(ConnectionType.CLIENT)
    request = Request(
        host=f"{host}:{port}",
        target=f"/proxy/{task_id}/",
        extra_headers=[(b"authorization", f"Bearer {token}".encode())],
    )
    sock.sendall(conn.send(request))
    body = b""
    while True:
        data = sock.recv(_READ)
        if not data:
            raise ConnectionError("the master closed the connection during the handshake")
        conn.receive_data(data)
        for event in conn.events():
            if isinstance(event, AcceptConnection):
                return Tunnel(sock, conn)
            if isinstance(event, RejectData):
                body += event.data
                if event.body_finished:
                    raise ConnectionRefusedError(body.decode(errors="replace").strip())
            elif isinstance(event, RejectConnection):
                if not event.has_body:
                    raise ConnectionRefusedError(f"the master answered {event.status_code}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="ssh's ProxyCommand for det shell")
    parser.add_argument("master")
    parser.add_argument("task_id")
    parser.add_argument("-u", "--user", help="whose cached session to use")
    parser.add_argument("--cert-file", help="the CA certificate of a TLS master")
    args = parser.parse_args(argv)
    user = credentials.wanted_user(args.master, args.user)
    token = credentials.cached_token(args.master, user) if user else None
    if token is None:
        print(f"not logged in to {args.master}: run det user login", file=sys.stderr)
        return 1
    try:
        tunnel = connect(args.master, args.task_id, token, client.master_cert_file(args.cert_file))
    except OSError as e:
        print(f"cannot reach shell {args.task_id} through {args.master}: {e}", file=sys.stderr)
        return 1
    threading.Thread(target=tunnel.upstream, daemon=True).start()
    tunnel.downstream()
    return 0


if __name__ == "__main__":
    sys.exit(main())
