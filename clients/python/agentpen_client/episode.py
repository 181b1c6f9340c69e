"""The episode client: OpenEnv's WebSocket protocol on a workspace's base_url.

A workspace's base_url (from the launcher API) is all it needs, as for
OpenEnv's own clients: it opens <base_url>/ws and sends one JSON text frame per
call ({"type": "reset", "data": {...}}, {"type": "step", "data": action},
{"type": "state"}, {"type": "close"}), one reply per frame. An error frame is an
EpisodeError. It also speaks to a workbench's unix socket (unix=...), as
agentpen up hands them out.

    with EpisodeClient(workspace["base_url"]) as env:
        obs = env.reset()                       # the workspace's own task
        env.step("read_file", path="solution.py")
        result = env.step("submit", answer="...")
        print(result["reward"], result["done"])
"""

import json

from .errors import AgentpenError, EpisodeError
from .websocket import connect, open_socket

__all__ = ["EpisodeClient", "health"]


class EpisodeClient:
    """One WebSocket session with a workspace's episode server."""

    def __init__(self, base_url=None, unix=None, timeout=60.0):
        if bool(base_url) == bool(unix):
            raise ValueError("give a base_url or a unix socket, one of them")
        self.ws = connect(base_url, "/ws", unix=unix, timeout=timeout)

    def call(self, message):
        """Sends one message and returns its reply's data (an error frame
        raises EpisodeError)."""
        self.ws.send_text(json.dumps(message))
        raw = self.ws.recv()
        try:
            reply = json.loads(raw)
        except ValueError:
            raise AgentpenError("the episode server answered something that is not JSON: %.200r" % raw) from None
        if reply.get("type") == "error":
            data = reply.get("data") or {}
            raise EpisodeError(data.get("message", ""), data.get("code", "UNKNOWN"))
        return reply.get("data")

    def reset(self, **kwargs):
        """Starts an episode (a workspace serves its own task: give no
        task_id, or that one); returns the observation, reward, done and
        metadata (metadata.task_id is for the trainer, not the agent)."""
        return self.call({"type": "reset", "data": kwargs})

    def step(self, tool, **args):
        """One tool call (list_files, read_file, run_python, write_file,
        run_tests, check, submit); returns the result."""
        return self.call({"type": "step", "data": {"tool": tool, "args": args}})

    def state(self):
        """The episode's state (episode_id, step_count, ...)."""
        return self.call({"type": "state"})

    def close(self):
        """Ends the session."""
        try:
            self.ws.send_text(json.dumps({"type": "close"}))
        except OSError:
            pass
        self.ws.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def health(base_url=None, unix=None, timeout=10.0):
    """GET <base_url>/health (or /health on the unix socket): the status
    and the body, decoded."""
    sock, host, prefix = open_socket(base_url, unix, timeout)
    with sock:
        sock.sendall(("GET %s/health HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (prefix, host)).encode())
        data = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    if b"transfer-encoding: chunked" in head.lower():
        body = _unchunk(body)
    return int(head.split()[1]), body.decode("utf-8", "replace")


def _unchunk(body):
    out = b""
    while body:
        size, _, rest = body.partition(b"\r\n")
        n = int(size.split(b";")[0], 16)
        if n == 0:
            break
        out, body = out + rest[:n], rest[n + 2 :]
    return out
