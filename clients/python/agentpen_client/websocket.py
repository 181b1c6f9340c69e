"""A small WebSocket client (RFC 6455) of the standard library: what the
episode client speaks to a workspace's base_url (<base_url>/ws).

Text and binary messages, masking, fragmentation, ping and pong, the close
handshake; over TCP (ws://, or wss:// through the ssl module) or a unix socket.
It is a client for one conversation at a time: calls are not thread-safe.
"""

import base64
import hashlib
import os
import socket
import ssl
import struct
from urllib.parse import urlsplit

from .errors import AgentpenError, ConnectionClosed

__all__ = ["WebSocket", "connect", "open_socket"]

_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

# Messages larger than this are refused (the launcher's proxy relays up to
# 16 MiB).
MAX_MESSAGE = 64 << 20


def open_socket(url=None, unix=None, timeout=60.0):
    """A connected socket to url (http, https, ws or wss) or to the unix
    socket unix, and the Host header and path prefix to use on it."""
    if unix:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        try:
            s.connect(unix)
        except OSError:
            s.close()
            raise
        return s, "localhost", ""
    u = urlsplit(url if "://" in url else "http://" + url)
    secure = u.scheme in ("https", "wss")
    port = u.port or (443 if secure else 80)
    s = socket.create_connection((u.hostname, port), timeout=timeout)
    if secure:
        try:
            s = ssl.create_default_context().wrap_socket(s, server_hostname=u.hostname)
        except (OSError, ssl.SSLError):
            s.close()
            raise
    return s, u.netloc, u.path.rstrip("/")


def connect(url=None, path="", unix=None, timeout=60.0, headers=None):
    """Opens a WebSocket at url + path (or path on the unix socket unix)."""
    sock, host, prefix = open_socket(url, unix, timeout)
    try:
        return WebSocket(sock, host, prefix + path, headers)
    except BaseException:
        sock.close()
        raise


class WebSocket:
    """A client WebSocket on a connected socket: the opening handshake in
    the constructor, then send_text, recv and close."""

    def __init__(self, sock, host, path, headers=None):
        self.sock = sock
        self.buf = b""
        self.closed = False
        key = base64.b64encode(os.urandom(16)).decode()
        extra = "".join("%s: %s\r\n" % kv for kv in (headers or {}).items())
        req = (
            "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n%s\r\n" % (path or "/", host, key, extra)
        )
        self.sock.sendall(req.encode())
        head = self._read_until(b"\r\n\r\n").decode("latin-1")
        status = head.split("\r\n", 1)[0]
        parts = status.split(" ", 2)
        if len(parts) < 2 or parts[1] != "101":
            # The body of a refusal (a problem, for the launcher's proxy)
            # says why; read what came with the head.
            # (The path is not said: a base_url's holds its capability.)
            raise AgentpenError("WebSocket upgrade refused: %s %s" % (status, self.buf[:512].decode("utf-8", "replace").strip()))
        fields = {}
        for line in head.split("\r\n")[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                fields[k.strip().lower()] = v.strip()
        want = base64.b64encode(hashlib.sha1((key + _GUID).encode()).digest()).decode()
        if fields.get("sec-websocket-accept") != want:
            raise AgentpenError("WebSocket upgrade: a bad Sec-WebSocket-Accept")

    def _recv(self, n):
        chunk = self.sock.recv(n)
        if not chunk:
            self.closed = True
            raise ConnectionClosed(1006, "the connection ended without a close frame")
        return chunk

    def _read_until(self, marker):
        while marker not in self.buf:
            if len(self.buf) > 1 << 16:
                raise AgentpenError("WebSocket upgrade: a response head over 64 KiB")
            self.buf += self._recv(65536)
        head, self.buf = self.buf.split(marker, 1)
        return head

    def _read_exact(self, n):
        while len(self.buf) < n:
            self.buf += self._recv(max(65536, n - len(self.buf)))
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _send_frame(self, opcode, payload):
        header = bytes([0x80 | opcode])
        n = len(payload)
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 1 << 16:
            header += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack("!Q", n)
        mask = os.urandom(4)
        self.sock.sendall(header + mask + _mask(payload, mask))

    def send_text(self, text):
        """Sends one text message."""
        self._send_frame(0x1, text.encode("utf-8"))

    def send_binary(self, data):
        """Sends one binary message."""
        self._send_frame(0x2, bytes(data))

    def recv(self):
        """The next message (str for text, bytes for binary), answering pings
        on the way; ConnectionClosed once the server closes."""
        parts, first_op, size = [], None, 0
        while True:
            b0, b1 = self._read_exact(2)
            fin, opcode, n = b0 & 0x80, b0 & 0x0F, b1 & 0x7F
            if b1 & 0x80:
                raise AgentpenError("WebSocket: a masked frame from the server")
            if n == 126:
                n = struct.unpack("!H", self._read_exact(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._read_exact(8))[0]
            if size + n > MAX_MESSAGE:
                raise AgentpenError("WebSocket: a message over %d bytes" % MAX_MESSAGE)
            payload = self._read_exact(n)
            if opcode == 0x9:  # ping
                self._send_frame(0xA, payload)
                continue
            if opcode == 0xA:  # pong
                continue
            if opcode == 0x8:  # close: answer it, then say so
                code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 1005
                try:
                    self._send_frame(0x8, payload[:2])
                except OSError:
                    pass
                self.closed = True
                raise ConnectionClosed(code, payload[2:].decode("utf-8", "replace"))
            if opcode in (0x1, 0x2):
                first_op = opcode
            parts.append(payload)
            size += n
            if fin:
                data = b"".join(parts)
                return data.decode("utf-8") if first_op == 0x1 else data

    recv_text = recv

    def close(self, code=1000):
        """The close handshake (bounded by the socket's timeout), then the
        socket closed."""
        try:
            if not self.closed:
                self._send_frame(0x8, struct.pack("!H", code))
                while True:
                    self.recv()
        except (ConnectionClosed, OSError, AgentpenError):
            pass
        finally:
            self.closed = True
            self.sock.close()


def _mask(payload, mask):
    n = len(payload)
    if n == 0:
        return b""
    key = int.from_bytes((mask * (n // 4 + 1))[:n], "big")
    return (int.from_bytes(payload, "big") ^ key).to_bytes(n, "big")
