"""The launcher API's client: agentpen serve's /v1 routes.

    from agentpen_client import Client
    c = Client()                              # AGENTPEN_URL, AGENTPEN_TOKEN
    camp = c.create(spec)                     # 201 once up and attested
    for w in camp["workspaces"]:
        print(w["agent_id"], w["base_url"])   # EpisodeClient (or OpenEnv) takes base_url
    c.delete(camp["campaign_id"])             # the verified cleanup report
"""

import http.client
import json
import os
import socket
import ssl
import threading
import time
import urllib.parse

from .errors import AgentpenError, ConnectionLost, api_error

__all__ = ["Client", "EventStream", "Keepalive", "DEFAULT_URL", "TOKEN_ENV", "URL_ENV"]

DEFAULT_URL = "http://127.0.0.1:8700"
# The variables a client reads: the service's URL and the launcher's bearer
# token. Not agentpen serve's AGENTPEN_SERVE_TOKEN, which holds the service's
# name:token lines.
URL_ENV = "AGENTPEN_URL"
TOKEN_ENV = "AGENTPEN_TOKEN"

# A stream that sends nothing for this long is taken for dead and resumed
# (the service sends a comment every 15 s).
STREAM_READ_TIMEOUT = 60.0


class Client:
    """The launcher API at url (AGENTPEN_URL, else http://127.0.0.1:8700; or
    unix:///path/api.sock) with a bearer token (AGENTPEN_TOKEN). timeout
    bounds each request (a create waits for the bring-up and attestation)."""

    def __init__(self, url=None, token=None, timeout=900.0):
        self.url = (url or os.environ.get(URL_ENV) or DEFAULT_URL).rstrip("/")
        self.token = token if token is not None else os.environ.get(TOKEN_ENV, "")
        self.timeout = timeout

    def __repr__(self):
        return "Client(%r)" % self.url  # never the token

    # -- campaigns -------------------------------------------------------

    def create(self, spec, wait=True, launcher_timeout=None):
        """Creates a campaign from spec (a dict, or JSON text: what agentpen
        up takes). With wait, answers once it is up and attested (201);
        otherwise at once (202, Prefer: respond-async) with the campaign
        reading creating: follow it with events() or wait_ready().
        launcher_timeout (seconds) ties it to this launcher: it is removed
        once no event stream of it is open and no keepalive came for that
        long (see hold())."""
        if launcher_timeout is not None:
            spec = json.loads(spec) if isinstance(spec, (str, bytes)) else dict(spec)
            spec["launcher_timeout_seconds"] = launcher_timeout
        body = spec if isinstance(spec, (str, bytes)) else json.dumps(spec)
        headers = {} if wait else {"Prefer": "respond-async"}
        return self._call("POST", "/v1/campaigns", body, headers)

    def wait_ready(self, campaign_id):
        """Follows the campaign's events to its first state event and returns
        the campaign once it is ready; a campaign that is not (its create
        failed, it did not attest) raises AgentpenError saying what it is."""
        state = None
        for ev in self.events(campaign_id):
            if ev.get("event") == "state":
                state = ev
                break
        camp = self.get(campaign_id)
        if camp.get("state") != "ready":
            why = (state or {}).get("msg", "")
            raise AgentpenError("campaign %s is %s, not ready: %s" % (campaign_id, camp.get("state"), why))
        return camp

    def list(self):
        """The campaigns this token created (the operator's: all)."""
        return self._call("GET", "/v1/campaigns")["campaigns"]

    def get(self, campaign_id):
        return self._call("GET", _campaign(campaign_id))

    def delete(self, campaign_id):
        """Removes the campaign; returns the verified cleanup report (a
        cleanup that is not verified is a ServerError naming the failed
        checks)."""
        return self._call("DELETE", _campaign(campaign_id))

    def patch(self, campaign_id, ttl_seconds=None, idle_timeout_seconds=None, launcher_timeout_seconds=None):
        """Changes the campaign's lifetime (a field left None is kept; 0 is
        none); returns the campaign."""
        body = {}
        for k, v in (("ttl_seconds", ttl_seconds), ("idle_timeout_seconds", idle_timeout_seconds), ("launcher_timeout_seconds", launcher_timeout_seconds)):
            if v is not None:
                body[k] = v
        return self._call("PATCH", _campaign(campaign_id), json.dumps(body))

    def keepalive(self, campaign_id):
        """Says this launcher is still there (a campaign tied to it:
        launcher_timeout_seconds); returns until when it is kept (gone_at)."""
        return self._call("POST", _campaign(campaign_id, "/keepalive"))

    def hold(self, campaign_id, every=None):
        """A Keepalive that sends keepalives every `every` seconds (default: a
        third of the campaign's launcher timeout) until it is stopped; use it
        as a context manager."""
        if every is None:
            lt = (self.get(campaign_id).get("lifetime") or {}).get("launcher_timeout_seconds") or 30
            every = max(1.0, lt / 3.0)
        return Keepalive(self, campaign_id, every)

    def workspaces(self, campaign_id):
        """A ready campaign's workspaces: agent ids, tasks and base_urls."""
        return self._call("GET", _campaign(campaign_id, "/workspaces"))["workspaces"]

    def claim(self, campaign_id, task_id, attempt_id=None):
        """Binds task_id to a workspace of the campaign's pool; returns the
        claim: its workspace (with base_url) and pool (warm or cold)."""
        body = {"task_id": task_id}
        if attempt_id:
            body["attempt_id"] = attempt_id
        return self._call("POST", _campaign(campaign_id, "/workspaces"), json.dumps(body))

    def attest(self, campaign_id):
        """Attests the campaign now; returns the fresh report."""
        return self._call("POST", _campaign(campaign_id, "/attestation"))

    def attestation(self, campaign_id):
        """The latest generation's stored attestation report."""
        return self._call("GET", _campaign(campaign_id, "/attestation"))

    def cleanup(self, campaign_id):
        """The latest generation's stored cleanup report."""
        return self._call("GET", _campaign(campaign_id, "/cleanup"))

    def verification(self, campaign_id):
        """The service's verification of the campaign's signed reports, as
        agentpen verify makes it: ok, and every check."""
        return self._call("GET", _campaign(campaign_id, "/verification"))

    def episodes(self, campaign_id, workspace=None):
        """Every episode result of the campaign, oldest first (all pages;
        kept after delete)."""
        out, after = [], 0
        while True:
            q = {"after": after, "limit": 1000}
            if workspace is not None:
                q["workspace"] = workspace
            page = self._call("GET", _campaign(campaign_id, "/episodes?" + urllib.parse.urlencode(q)))
            out.extend(page["episodes"])
            after = page.get("next", 0)
            if not after:
                return out

    results = episodes

    def events(self, campaign_id, last_event_id=None, retry_for=60.0):
        """The campaign's events as the service streams them (an EventStream:
        iterate it; its last_event_id is the id of the last event it gave).
        It follows the campaign while it lives: after each run of events, one
        of type "state" says what it is; it ends after the state removed.
        A dropped connection is resumed (Last-Event-ID) for up to retry_for
        seconds without an event, then raises ConnectionLost."""
        return EventStream(self, campaign_id, last_event_id, retry_for)

    # -- the catalogue ---------------------------------------------------

    def tasks(self):
        """The task catalogue."""
        return self._call("GET", "/v1/tasks")

    def task(self, task_id):
        """One task, as an agent sees it."""
        return self._call("GET", "/v1/tasks/" + urllib.parse.quote(task_id, safe=""))

    def images(self):
        """The daemon's images a spec can name."""
        return self._call("GET", "/v1/images")

    # -- plumbing --------------------------------------------------------

    def _connection(self, timeout):
        """A connection to the service: http://, https:// or unix:///path
        (agentpen serve --listen unix:///path/api.sock). No proxy from the
        environment is used: the service is the launcher's own."""
        u = urllib.parse.urlsplit(self.url)
        if u.scheme == "unix":
            return _UnixConnection(u.path, timeout), ""
        if u.scheme == "https":
            return http.client.HTTPSConnection(u.hostname, u.port, timeout=timeout, context=ssl.create_default_context()), u.path
        if u.scheme == "http":
            return http.client.HTTPConnection(u.hostname, u.port, timeout=timeout), u.path
        raise ValueError("the service's URL %r: want http://, https:// or unix:///path" % self.url)

    def _open(self, method, path, body=None, headers=None, timeout=None):
        h = {"Authorization": "Bearer " + self.token, "Accept": "application/json", "Connection": "close"}
        h.update(headers or {})
        data = None
        if body is not None:
            data = body.encode("utf-8") if isinstance(body, str) else body
            h["Content-Type"] = "application/json"
        elif method in ("POST", "PUT", "PATCH"):
            data = b""
        conn, prefix = self._connection(timeout or self.timeout)
        what = "%s %s" % (method, path.split("?")[0])
        try:
            conn.request(method, prefix + path, body=data, headers=h)
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise ConnectionLost("%s: the service at %s did not answer" % (what, self.url), e) from None
        if resp.status >= 400:
            try:
                raw = resp.read()
            except (OSError, http.client.HTTPException):
                raw = b""
            finally:
                conn.close()
            try:
                problem = json.loads(raw)
            except ValueError:
                problem = {"title": resp.reason, "detail": raw.decode("utf-8", "replace")}
            raise api_error(resp.status, problem)
        return resp

    def _call(self, method, path, body=None, headers=None):
        try:
            with self._open(method, path, body, headers) as resp:
                raw = resp.read()
        except (OSError, http.client.HTTPException) as e:
            raise ConnectionLost("%s %s: the answer was cut" % (method, path.split("?")[0]), e) from None
        return json.loads(raw) if raw else None


class EventStream:
    """An iterator over a campaign's events (dicts: the schema of agentpen's
    --log-format json records) that resumes a dropped connection where it
    was. last_event_id is the id of the last event it gave ("12", or
    "12:state" after a state event): give it to Client.events to go on
    later from there."""

    def __init__(self, client, campaign_id, last_event_id=None, retry_for=60.0):
        self.client = client
        self.campaign_id = campaign_id
        self.last_event_id = None if last_event_id is None else str(last_event_id)
        self.retry_for = retry_for
        self.resumed = 0  # how many times a dropped connection was resumed
        self._resp = None
        self._gen = self._follow()

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._gen)

    def close(self):
        """Stops following (closes the connection)."""
        self._gen.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _follow(self):
        path = _campaign(self.campaign_id, "/events")
        lost_since, delay, last_err = None, 0.25, None
        try:
            while True:
                headers = {"Accept": "text/event-stream"}
                if self.last_event_id is not None:
                    headers["Last-Event-ID"] = self.last_event_id
                try:
                    self._resp = self.client._open("GET", path, headers=headers, timeout=STREAM_READ_TIMEOUT)
                    lost_since, delay, ended = None, 0.25, False
                    for ev_id, ev in _read_events(self._resp):
                        if ev_id is not None:
                            self.last_event_id = ev_id
                        lost_since, delay = None, 0.25
                        ended = ev.get("event") == "state" and ev.get("state") in ("removed", "unusable")
                        yield ev
                    if ended:
                        return
                    last_err = "the stream ended before the campaign did (the service stopped?)"
                except ConnectionLost as e:
                    last_err = e.cause or e
                except (OSError, http.client.HTTPException) as e:
                    last_err = e
                finally:
                    if self._resp is not None:
                        self._resp.close()
                        self._resp = None
                now = time.monotonic()
                if lost_since is None:
                    lost_since = now
                elif now - lost_since > self.retry_for:
                    raise ConnectionLost("the events of %s: no answer for %.0f s" % (self.campaign_id, now - lost_since), last_err)
                time.sleep(delay)
                delay = min(delay * 2, 5.0)
                self.resumed += 1
        finally:
            if self._resp is not None:
                self._resp.close()


def _read_events(resp):
    """(id, event) for each whole message of an event stream; a message cut
    short is dropped (it is sent again on resuming)."""
    data, ev_id = [], None
    while True:
        raw = resp.readline()
        if not raw:
            return
        if not raw.endswith(b"\n"):
            return  # cut in the middle of a line
        line = raw.decode("utf-8").rstrip("\r\n")
        if line.startswith(":"):
            continue
        if line.startswith("id:"):
            ev_id = line[3:].lstrip(" ")
        elif line.startswith("data:"):
            data.append(line[5:].lstrip(" "))
        elif line == "" and data:
            ev = json.loads("\n".join(data))
            yield ev_id, ev
            data, ev_id = [], None


class Keepalive:
    """Sends a campaign's keepalive every `every` seconds in a thread of its
    own until stop() (or the end of a with block): the campaign, tied to its
    launcher, lives while this process does. A keepalive that fails is
    tried again at the next tick; the last error is kept in error."""

    def __init__(self, client, campaign_id, every):
        self.client = client
        self.campaign_id = campaign_id
        self.every = every
        self.error = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="agentpen-keepalive", daemon=True)
        self._thread.start()

    def _run(self):
        while True:
            try:
                self.client.keepalive(self.campaign_id)
                self.error = None
            except AgentpenError as e:
                self.error = e
            if self._stop.wait(self.every):
                return

    def stop(self):
        self._stop.set()
        self._thread.join()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


class _UnixConnection(http.client.HTTPConnection):
    """HTTP on a unix socket."""

    def __init__(self, path, timeout):
        super().__init__("agentpen", timeout=timeout)
        self.path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(self.path)
        except OSError:
            s.close()
            raise
        self.sock = s


def _campaign(campaign_id, rest=""):
    return "/v1/campaigns/" + urllib.parse.quote(campaign_id, safe="") + rest
