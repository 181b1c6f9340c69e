#!/usr/bin/env python3
"""A standard-library OpenEnv client for the workbench, and an oracle player.

The client speaks what OpenEnv's EnvClient speaks: a WebSocket at <base>/ws
(RFC 6455 by hand, no third-party package), one JSON text frame per call
({"type": "reset", "data": kwargs}, {"type": "step", "data": action},
{"type": "state"}, {"type": "close"}), one reply per frame, an error frame
raised as RuntimeError("Server error: <message> (code: <code>)").

Run as a script, it plays one episode per task given on the command line with
the oracle answers of testdata/oracles (see its README) and prints one line
per episode, "<task_id> reward=<reward> steps=<n>", then a JSON summary line.

    workbench_client.py --url http://127.0.0.1:8000 --oracles testdata/oracles \
        data/csv_region_total=number software/median=code
    workbench_client.py --unix /run/workbench/wb.sock ...
"""

import argparse
import base64
import hashlib
import json
import os
import re
import socket
import struct
import sys
from urllib.parse import urlparse

_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class ConnectionClosed(Exception):
    """The server closed the WebSocket; code and reason are its close frame's."""

    def __init__(self, code, reason):
        super().__init__(f"connection closed: {code} {reason}")
        self.code = code
        self.reason = reason


class WebSocket:
    """A minimal RFC 6455 client: text frames, masking, fragmentation,
    ping/pong and the close handshake."""

    def __init__(self, sock, host, path, timeout=60.0):
        self.sock = sock
        self.sock.settimeout(timeout)
        self.buf = b""
        key = base64.b64encode(os.urandom(16)).decode()
        req = (
            f"GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        self.sock.sendall(req.encode())
        head = self._read_until(b"\r\n\r\n").decode("latin-1")
        status = head.split("\r\n", 1)[0]
        if " 101 " not in status + " ":
            raise RuntimeError(f"WebSocket upgrade refused: {status}")
        headers = {}
        for line in head.split("\r\n")[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        want = base64.b64encode(hashlib.sha1((key + _GUID).encode()).digest()).decode()
        if headers.get("sec-websocket-accept") != want:
            raise RuntimeError("bad Sec-WebSocket-Accept")

    def _read_until(self, marker):
        while marker not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionClosed(1006, "EOF during handshake")
            self.buf += chunk
        head, self.buf = self.buf.split(marker, 1)
        return head

    def _read_exact(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(max(65536, n - len(self.buf)))
            if not chunk:
                raise ConnectionClosed(1006, "EOF")
            self.buf += chunk
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
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload)) if n < 4096 else _mask_fast(payload, mask)
        self.sock.sendall(header + mask + masked)

    def send_text(self, text):
        self._send_frame(0x1, text.encode("utf-8"))

    def recv_text(self):
        """The next data message, answering pings on the way."""
        parts, first_op = [], None
        while True:
            b0, b1 = self._read_exact(2)
            fin, opcode, n = b0 & 0x80, b0 & 0x0F, b1 & 0x7F
            if b1 & 0x80:
                raise RuntimeError("server frames must not be masked")
            if n == 126:
                n = struct.unpack("!H", self._read_exact(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._read_exact(8))[0]
            payload = self._read_exact(n)
            if opcode == 0x9:  # ping
                self._send_frame(0xA, payload)
                continue
            if opcode == 0xA:  # pong
                continue
            if opcode == 0x8:  # close: answer it, then report it
                code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 1005
                try:
                    self._send_frame(0x8, payload[:2])
                except OSError:
                    pass
                raise ConnectionClosed(code, payload[2:].decode("utf-8", "replace"))
            if opcode in (0x1, 0x2):
                first_op = opcode
            parts.append(payload)
            if fin:
                data = b"".join(parts)
                return data.decode("utf-8") if first_op == 0x1 else data

    def close(self, code=1000):
        try:
            self._send_frame(0x8, struct.pack("!H", code))
            while True:
                self.recv_text()
        except (ConnectionClosed, OSError, RuntimeError):
            pass
        finally:
            self.sock.close()


def _mask_fast(payload, mask):
    n = len(payload)
    key = int.from_bytes((mask * (n // 4 + 1))[:n], "big")
    return (int.from_bytes(payload, "big") ^ key).to_bytes(n, "big")


def _connect(url=None, unix=None, timeout=60.0):
    if unix:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(unix)
        return s, "localhost", ""
    u = urlparse(url if "://" in url else "http://" + url)
    port = u.port or (443 if u.scheme in ("https", "wss") else 80)
    s = socket.create_connection((u.hostname, port), timeout=timeout)
    return s, u.netloc, u.path.rstrip("/")


class EnvClient:
    """OpenEnv's EnvClient framing over WebSocket (GenericEnvClient results:
    dicts with observation, reward, done and metadata)."""

    def __init__(self, url=None, unix=None, timeout=60.0):
        sock, host, prefix = _connect(url, unix, timeout)
        self.ws = WebSocket(sock, host, prefix + "/ws", timeout)

    def _call(self, message):
        self.ws.send_text(json.dumps(message))
        reply = json.loads(self.ws.recv_text())
        if reply.get("type") == "error":
            data = reply.get("data", {})
            raise RuntimeError(f"Server error: {data.get('message')} (code: {data.get('code', 'UNKNOWN')})")
        return reply["data"]

    def reset(self, **kwargs):
        return self._call({"type": "reset", "data": kwargs})

    def step(self, tool, **args):
        return self._call({"type": "step", "data": {"tool": tool, "args": args}})

    def state(self):
        return self._call({"type": "state"})

    def close(self):
        try:
            self.ws.send_text(json.dumps({"type": "close"}))
        except OSError:
            pass
        self.ws.close()


def http_get(path, url=None, unix=None, timeout=10.0):
    """GET path over plain HTTP/1.1 on the same transport; (status, body)."""
    sock, host, prefix = _connect(url, unix, timeout)
    with sock:
        sock.sendall(f"GET {prefix}{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body.decode("utf-8", "replace")


def _last_line(output):
    """The last line a run_python script printed, without the exit-code trailer."""
    lines = [ln for ln in output.strip().splitlines() if ln.strip()]
    if lines and re.fullmatch(r"\[exit code -?\d+\]", lines[-1].strip()):
        lines = lines[:-1]
    if not lines:
        raise RuntimeError(f"the oracle printed nothing: {output!r}")
    return lines[-1].strip()


def play(client, task_id, kind, oracle):
    """One episode of task_id solved with the oracle, as testdata/oracles/README.md
    describes it; returns the final result."""
    obs = client.reset(task_id=task_id)
    instruction = obs["observation"]["task"]
    if kind == "code":
        client.step("read_file", path="solution.py")
        client.step("write_file", path="solution.py", content=oracle)
        tests = client.step("run_tests")
        if tests["observation"].get("error"):
            raise RuntimeError(f"{task_id}: run_tests refused: {tests['observation']['error']}")
        result = client.step("submit", answer="fixed")
    else:
        run = client.step("run_python", code="INSTRUCTION = " + json.dumps(instruction) + "\n" + oracle)
        answer = _last_line(run["observation"]["output"])
        client.step("check", answer=answer)
        result = client.step("submit", answer=answer)
    if not result["done"]:
        raise RuntimeError(f"{task_id}: submit did not end the episode: {result}")
    return result


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", help="server base URL, e.g. http://127.0.0.1:8000")
    p.add_argument("--unix", help="server unix socket path")
    p.add_argument("--oracles", required=True, help="the testdata/oracles directory")
    p.add_argument("tasks", nargs="+", help="TASK_ID=ANSWER_KIND, e.g. software/median=code")
    a = p.parse_args(argv)
    if bool(a.url) == bool(a.unix):
        p.error("give exactly one of --url and --unix")
    status, body = http_get("/health", a.url, a.unix)
    if status != 200 or json.loads(body) != {"status": "healthy"}:
        raise SystemExit(f"health: {status} {body}")
    rewards = {}
    for item in a.tasks:
        task_id, _, kind = item.partition("=")
        # One oracle serves every variant of a family ("domain/family@N").
        family = task_id.partition("@")[0]
        with open(os.path.join(a.oracles, family + ".py"), encoding="utf-8") as fh:
            oracle = fh.read()
        client = EnvClient(a.url, a.unix)
        try:
            result = play(client, task_id, kind, oracle)
            steps = client.state()["step_count"]
        finally:
            client.close()
        rewards[task_id] = result["reward"]
        print(f"{task_id} reward={result['reward']} steps={steps}", flush=True)
    print(json.dumps({"rewards": rewards}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
