"""The errors of agentpen_client: every one is an AgentpenError.

An error answer of the launcher API is an APIError (a subclass per status:
NotFound, Conflict, ...) carrying the service's RFC 9457 problem; a service
that cannot be reached, or a stream it stopped answering and that could not be
resumed, is a ConnectionLost; an episode server's error frame is an
EpisodeError, and a WebSocket the server closed a ConnectionClosed.
"""

__all__ = [
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
    "api_error",
]


class AgentpenError(Exception):
    """Every error agentpen_client raises."""


class APIError(AgentpenError):
    """An error answer of the launcher API: its status and problem (RFC 9457:
    title, detail, and errors, each with a message and the location of what is
    wrong, e.g. body.workspaces[1].task_id)."""

    def __init__(self, status, problem):
        self.status = status
        self.problem = problem if isinstance(problem, dict) else {"detail": str(problem)}
        self.title = self.problem.get("title", "")
        self.detail = self.problem.get("detail", "")
        self.errors = self.problem.get("errors") or []
        fields = "; ".join("%s: %s" % (e.get("location", ""), e.get("message", "")) for e in self.errors if isinstance(e, dict))
        super().__init__("%d %s: %s%s" % (status, self.title, self.detail, " [%s]" % fields if fields else ""))


class BadRequest(APIError):
    """400: the request is malformed (a body that is not JSON, a bad id)."""


class Unauthorized(APIError):
    """401: no token, or not one of the service's (AGENTPEN_TOKEN)."""


class Forbidden(APIError):
    """403: the token may not do this (a keepalive of another launcher's campaign)."""


class NotFound(APIError):
    """404: no such campaign (or another launcher's: the same answer)."""


class Conflict(APIError):
    """409: the campaign's state does not allow it (it exists, is not ready, is busy)."""


class Invalid(APIError):
    """422: a field breaks a rule (errors names each)."""


class ServerError(APIError):
    """5xx: the operation failed (a cleanup not verified, an attestation that failed)."""


_BY_STATUS = {400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict, 422: Invalid}


def api_error(status, problem):
    """The APIError of an answer with status and problem."""
    cls = _BY_STATUS.get(status, ServerError if status >= 500 else APIError)
    return cls(status, problem)


class ConnectionLost(AgentpenError):
    """The service could not be reached, or a connection to it dropped and
    could not be resumed in time; cause is the last transport error."""

    def __init__(self, message, cause=None):
        super().__init__(message if cause is None else "%s: %s" % (message, cause))
        self.cause = cause


class EpisodeError(AgentpenError):
    """An error frame of the episode server (OpenEnv's): its code and message.
    str() reads as OpenEnv's clients say it: Server error: MESSAGE (code: CODE)."""

    def __init__(self, message, code="UNKNOWN"):
        super().__init__("Server error: %s (code: %s)" % (message, code))
        self.message = message
        self.code = code


class ConnectionClosed(AgentpenError):
    """The episode server closed the WebSocket: its close code and reason
    (1001: the workspace was revoked, its campaign deleted or not ready)."""

    def __init__(self, code, reason):
        super().__init__("connection closed: %s %s" % (code, reason))
        self.code = code
        self.reason = reason
