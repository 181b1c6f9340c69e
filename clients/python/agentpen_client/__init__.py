"""agentpen_client: a client of agentpen serve's launcher API, an episode client
for a workspace's base_url, and the agentpen-client command. The Python standard
library only (3.9+).

Install it (offline; no setuptools or wheel needed):

    python3 -m venv venv && venv/bin/pip install ./clients/python

A launcher:

    from agentpen_client import Client, EpisodeClient
    c = Client()                                # $AGENTPEN_URL, $AGENTPEN_TOKEN
    camp = c.create(spec)                       # 201 once up and attested
    with EpisodeClient(camp["workspaces"][0]["base_url"]) as env:
        env.reset()                             # the workspace's own task
        result = env.step("submit", answer="...")
    c.delete(camp["campaign_id"])               # the verified cleanup report

The launcher API: create (or create(spec, wait=False) and wait_ready), list,
get, workspaces, claim, patch, keepalive (and hold: keepalives in a thread),
events (a stream that follows the campaign while it lives, resuming a dropped
connection with Last-Event-ID), attest, attestation, cleanup, verification,
episodes, delete, tasks, images. Every error answer is an APIError (NotFound, Conflict, Invalid,
...) with the service's RFC 9457 problem; a service that cannot be reached is a
ConnectionLost. The token is $AGENTPEN_TOKEN (never agentpen serve's
AGENTPEN_SERVE_TOKEN, which holds the service's name:token lines). The
service's OpenAPI document is at /v1/openapi.json.

The command line: agentpen-client --help (or python -m agentpen_client).
"""

__version__ = "0.1.0"

from .api import DEFAULT_URL, TOKEN_ENV, URL_ENV, Client, EventStream, Keepalive
from .episode import EpisodeClient, health
from .errors import (
    AgentpenError,
    APIError,
    BadRequest,
    Conflict,
    ConnectionClosed,
    ConnectionLost,
    EpisodeError,
    Forbidden,
    Invalid,
    NotFound,
    ServerError,
    Unauthorized,
)
from .websocket import WebSocket

__all__ = [
    "Client",
    "EventStream",
    "Keepalive",
    "EpisodeClient",
    "WebSocket",
    "health",
    "AgentpenError",
    "APIError",
    "BadRequest",
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "Conflict",
    "Invalid",
    "ServerError",
    "ConnectionLost",
    "EpisodeError",
    "ConnectionClosed",
    "DEFAULT_URL",
    "TOKEN_ENV",
    "URL_ENV",
]
