#!/usr/bin/env python3
"""The main job as a benchmark launcher does it, through agentpen serve's HTTP API only.

Creates a campaign (POST /v1/campaigns), plays one oracle episode per workspace through
each workspace's base_url with the standard-library OpenEnv client (workbench_client.py:
WebSocket at <base_url>/ws, nothing else), fetches the attestation (it must be ok),
deletes the campaign (the cleanup must be verified), and prints a table (workspace, task,
reward, steps) and the paths of the JSON reports. Standard library only.

    launcher_demo.py --api http://127.0.0.1:8700 --image sha256:... --oracles testdata/oracles \
        --campaign demo-1 software/median@7=code sql/top_customer@3=text

The bearer token is read from the environment variable --token-env names (default
AGENTPEN_SERVE_TOKEN), never from the command line. Exit status 0 when every episode
reached reward 1.0, the attestation is ok and the cleanup verified; 1 otherwise.
"""

import argparse
import json
import os
import sys
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workbench_client  # noqa: E402


class APIError(Exception):
    """An RFC 9457 problem the API answered with."""

    def __init__(self, status, problem):
        detail = problem.get("detail", "")
        fields = "; ".join(f"{e.get('location')}: {e.get('message')}" for e in problem.get("errors") or [])
        super().__init__(f"{status} {problem.get('title', '')}: {detail}" + (f" [{fields}]" if fields else ""))
        self.status = status
        self.problem = problem


class API:
    """The launcher API: JSON over HTTP with the bearer token."""

    def __init__(self, base, token):
        self.base = base.rstrip("/")
        self.token = token

    def call(self, method, path, body=None, timeout=300):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Authorization", "Bearer " + self.token)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return json.load(resp)
        except urllib.error.HTTPError as e:
            try:
                problem = json.load(e)
            except ValueError:
                problem = {"detail": str(e)}
            raise APIError(e.code, problem) from None


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--api", required=True, help="agentpen serve's URL")
    p.add_argument("--token-env", default="AGENTPEN_SERVE_TOKEN", help="variable holding the bearer token")
    p.add_argument("--image", required=True, help="pinned image of the grader and the workspaces")
    p.add_argument("--oracles", required=True, help="the testdata/oracles directory")
    p.add_argument("--campaign", required=True, help="campaign id")
    p.add_argument("tasks", nargs="+", help="TASK_ID=ANSWER_KIND")
    a = p.parse_args(argv)
    token = os.environ.get(a.token_env, "")
    if not token:
        p.error(f"${a.token_env} is not set")
    api = API(a.api, token)

    kinds = dict(t.partition("=")[::2] for t in a.tasks)
    spec = {
        "campaign_id": a.campaign,
        "server": {"image": a.image},
        "workspaces": [{"task_id": t, "image": a.image} for t in kinds],
    }
    campaign = api.call("POST", "/v1/campaigns", spec)
    cid = campaign["campaign_id"]
    log(f"campaign {cid} ready: {len(campaign['workspaces'])} workspaces, attestation ok={campaign['attestation']['ok']}")
    rows, ok = [], True
    try:
        for w in campaign["workspaces"]:
            task = w["task_id"]
            family = task.partition("@")[0]
            with open(os.path.join(a.oracles, family + ".py"), encoding="utf-8") as fh:
                oracle = fh.read()
            # base_url is all an OpenEnv client needs; the proxy serves the workspace's task.
            client = workbench_client.EnvClient(url=w["base_url"])
            try:
                result = workbench_client.play(client, task, kinds[task], oracle)
                steps = client.state()["step_count"]
            finally:
                client.close()
            rows.append((w["agent_id"], task, result["reward"], steps))
            ok = ok and result["reward"] == 1.0
        attestation = api.call("GET", f"/v1/campaigns/{cid}/attestation")
        ok = ok and attestation["ok"]
        log(f"attestation: ok={attestation['ok']} ({len(attestation['failed_checks'])} failed checks)")
    finally:
        try:
            report = api.call("DELETE", f"/v1/campaigns/{cid}")
            cleanup = report["status"]
        except APIError as e:
            cleanup = f"NOT verified ({e})"
            ok = False
        log(f"cleanup: {cleanup}")
    print(f"{'workspace':<32} {'task':<28} {'reward':>6} {'steps':>5}")
    for agent, task, reward, steps in rows:
        print(f"{agent:<32} {task:<28} {reward:>6.1f} {steps:>5}")
    print(f"attestation report: {campaign['attestation']['path']}")
    print(f"cleanup report:     {os.path.join(campaign['state_dir'], 'cleanup.json')}")
    print(f"cleanup:            {cleanup}")
    return 0 if ok else 1


def log(msg):
    print(f"demo: {msg}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except APIError as e:
        print(f"demo: the API refused: {e}", file=sys.stderr)
        sys.exit(1)
