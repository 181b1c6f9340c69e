#!/usr/bin/env python3
"""agentpen_client: a client of `agentpen serve`'s launcher API.

One file, the Python standard library only (3.9+): copy it next to your
launcher. It speaks the API the service documents at /openapi.json.

    from agentpen_client import Client
    c = Client("http://127.0.0.1:8700", token=open("token").read().strip())
    camp = c.create(spec)                 # 201 once up and attested
    for w in camp["workspaces"]:
        print(w["agent_id"], w["base_url"])  # OpenEnv clients take base_url
    ...
    print(c.episodes(camp["campaign_id"]))  # rewards, kept after delete
    c.delete(camp["campaign_id"])         # the verified cleanup report

The token defaults to $AGENTPEN_SERVE_TOKEN. Every error the service
answers is an AgentpenError carrying its RFC 9457 problem. As a command:

    agentpen_client.py [--url URL] create SPEC.json [--async]
    agentpen_client.py [--url URL] get|delete|workspaces|attest|episodes|events ID
    agentpen_client.py [--url URL] list|tasks|images

prints the answer as JSON (events: one line per event) and exits 0, 1 on
an error answer, 2 on bad usage.
"""

import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

__all__ = ["Client", "AgentpenError"]

DEFAULT_URL = "http://127.0.0.1:8700"


class AgentpenError(Exception):
    """An error answer: status, and the problem's title and detail."""

    def __init__(self, status, problem):
        self.status = status
        self.problem = problem if isinstance(problem, dict) else {"detail": str(problem)}
        self.title = self.problem.get("title", "")
        self.detail = self.problem.get("detail", "")
        super().__init__("%d %s: %s" % (status, self.title, self.detail))


class Client:
    """The launcher API at url, with a bearer token."""

    def __init__(self, url=DEFAULT_URL, token=None, timeout=900):
        self.url = url.rstrip("/")
        self.token = token if token is not None else os.environ.get("AGENTPEN_SERVE_TOKEN", "")
        self.timeout = timeout

    # -- campaigns -------------------------------------------------------

    def create(self, spec, wait=True):
        """Creates a campaign from spec (a dict, or JSON text). With wait,
        answers once it is up and attested (201); otherwise at once (202,
        Prefer: respond-async) with the campaign reading creating: follow
        it with events() or wait_ready()."""
        body = spec if isinstance(spec, (str, bytes)) else json.dumps(spec)
        headers = {} if wait else {"Prefer": "respond-async"}
        return self._call("POST", "/v1/campaigns", body=body, headers=headers)

    def wait_ready(self, campaign_id):
        """Follows the campaign's events to their end and returns the
        campaign; raises AgentpenError unless it is ready."""
        last = None
        for ev in self.events(campaign_id):
            last = ev
        camp = self.get(campaign_id)
        if camp.get("state") != "ready":
            raise AgentpenError(409, {"title": "not ready", "detail": "campaign %s is %s (last event: %s)" % (campaign_id, camp.get("state"), last)})
        return camp

    def list(self):
        return self._call("GET", "/v1/campaigns")["campaigns"]

    def get(self, campaign_id):
        return self._call("GET", "/v1/campaigns/" + _id(campaign_id))

    def delete(self, campaign_id):
        """Removes the campaign; returns the verified cleanup report."""
        return self._call("DELETE", "/v1/campaigns/" + _id(campaign_id))

    def patch(self, campaign_id, ttl_seconds=None, idle_timeout_seconds=None):
        """Changes the campaign's lifetime."""
        body = {}
        if ttl_seconds is not None:
            body["ttl_seconds"] = ttl_seconds
        if idle_timeout_seconds is not None:
            body["idle_timeout_seconds"] = idle_timeout_seconds
        return self._call("PATCH", "/v1/campaigns/" + _id(campaign_id), body=json.dumps(body))

    def workspaces(self, campaign_id):
        return self._call("GET", "/v1/campaigns/%s/workspaces" % _id(campaign_id))["workspaces"]

    def claim(self, campaign_id, task_id, attempt_id=None):
        """Binds task_id to a workspace of the campaign's pool; returns the
        claim: its workspace (with base_url) and pool (warm or cold)."""
        body = {"task_id": task_id}
        if attempt_id:
            body["attempt_id"] = attempt_id
        return self._call("POST", "/v1/campaigns/%s/workspaces" % _id(campaign_id), json.dumps(body))

    def attest(self, campaign_id):
        """Attests the campaign now; returns the fresh report."""
        return self._call("POST", "/v1/campaigns/%s/attestation" % _id(campaign_id))

    def attestation(self, campaign_id):
        return self._call("GET", "/v1/campaigns/%s/attestation" % _id(campaign_id))

    def cleanup(self, campaign_id):
        return self._call("GET", "/v1/campaigns/%s/cleanup" % _id(campaign_id))

    def episodes(self, campaign_id, workspace=None):
        """Every episode result of the campaign, oldest first (all pages)."""
        out, after = [], 0
        while True:
            q = {"after": after, "limit": 1000}
            if workspace is not None:
                q["workspace"] = workspace
            page = self._call("GET", "/v1/campaigns/%s/episodes?%s" % (_id(campaign_id), urllib.parse.urlencode(q)))
            out.extend(page["episodes"])
            after = page.get("next", 0)
            if not after:
                return out

    def events(self, campaign_id, last_event_id=None):
        """Yields the campaign's events (dicts) as the service streams
        them; the last one has event == "state"."""
        headers = {"Accept": "text/event-stream"}
        if last_event_id is not None:
            headers["Last-Event-ID"] = str(last_event_id)
        resp = self._open("GET", "/v1/campaigns/%s/events" % _id(campaign_id), headers=headers)
        with resp:
            data = []
            for raw in resp:
                line = raw.decode("utf-8").rstrip("\r\n")
                if line.startswith("data:"):
                    data.append(line[5:].lstrip(" "))
                elif line == "" and data:
                    yield json.loads("\n".join(data))
                    data = []

    # -- the catalogue ---------------------------------------------------

    def tasks(self):
        return self._call("GET", "/v1/tasks")

    def images(self):
        return self._call("GET", "/v1/images")

    # -- plumbing --------------------------------------------------------

    def _open(self, method, path, body=None, headers=None):
        h = {"Authorization": "Bearer " + self.token, "Accept": "application/json"}
        h.update(headers or {})
        data = None
        if body is not None:
            data = body.encode("utf-8") if isinstance(body, str) else body
            h["Content-Type"] = "application/json"
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=h)
        try:
            return urllib.request.urlopen(req, timeout=self.timeout)
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                problem = json.loads(raw)
            except ValueError:
                problem = {"detail": raw.decode("utf-8", "replace")}
            raise AgentpenError(e.code, problem) from None

    def _call(self, method, path, body=None, headers=None):
        with self._open(method, path, body, headers) as resp:
            raw = resp.read()
        return json.loads(raw) if raw else None


def _id(campaign_id):
    return urllib.parse.quote(campaign_id, safe="")


def main(argv):
    args = list(argv)
    url = os.environ.get("AGENTPEN_URL", DEFAULT_URL)
    if len(args) >= 2 and args[0] == "--url":
        url, args = args[1], args[2:]
    if not args or args[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if args else 2
    c, cmd, rest = Client(url), args[0], args[1:]
    try:
        if cmd == "create" and len(rest) in (1, 2) and rest[1:] in ([], ["--async"]):
            with open(rest[0]) as f:
                out = c.create(f.read(), wait=rest[1:] != ["--async"])
        elif cmd in ("get", "delete", "workspaces", "attest", "episodes") and len(rest) == 1:
            out = getattr(c, cmd)(rest[0])
        elif cmd == "events" and len(rest) == 1:
            for ev in c.events(rest[0]):
                print(json.dumps(ev), flush=True)
            return 0
        elif cmd in ("list", "tasks", "images") and not rest:
            out = getattr(c, cmd)()
        else:
            print("agentpen_client.py: bad usage (--help says how)", file=sys.stderr)
            return 2
    except AgentpenError as e:
        print("agentpen_client.py: %s" % e, file=sys.stderr)
        return 1
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
