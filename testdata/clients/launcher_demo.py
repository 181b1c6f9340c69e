#!/usr/bin/env python3
"""The main job as a benchmark launcher does it, through agentpen serve's HTTP API only,
with agentpen_client (clients/python, imported from this tree).

Creates a campaign (POST /v1/campaigns), plays one oracle episode per workspace through
each workspace's base_url with the standard-library OpenEnv client (workbench_client.py:
WebSocket at <base_url>/ws, nothing else), fetches the attestation (it must be ok),
deletes the campaign (the cleanup must be verified), and prints a table (workspace, task,
reward, steps) and the paths of the JSON reports. With --result FILE it also writes the same
as JSON (schema agentpen.demo.v1, below) to FILE, replaced whole. Standard library only.

    launcher_demo.py --api http://127.0.0.1:8700 --image sha256:... --oracles testdata/oracles \
        --campaign demo-1 --result result.json software/median@7=code sql/top_customer@3=text

The bearer token is read from the environment variable --token-env names (default
AGENTPEN_TOKEN, agentpen_client's), never from the command line. Exit status 0 when every
episode reached reward 1.0, the attestation is ok and the cleanup verified; 1 otherwise (an
episode that failed with an error counts as reward 0.0 and the others are still played).

The result file:

    {"schema": "agentpen.demo.v1", "ok": true, "campaign_id": "demo-1",
     "workspaces": [{"agent_id": "agent-...", "task_id": "software/median@7",
                     "reward": 1.0, "steps": 4, "error": ""}, ...],
     "attestation": {"ok": true, "report": ".../attestation-1-1.json"},
     "cleanup": {"status": "verified", "report": ".../cleanup-1-1.json", "error": ""}}

"ok" is true only when every reward is 1.0, the attestation is ok and the cleanup status is
"verified"; a run that failed before the campaign was created writes no file.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import workbench_client  # noqa: E402  (puts this tree's clients/python on the path)
from agentpen_client import AgentpenError, APIError, Client  # noqa: E402


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--api", required=True, help="agentpen serve's URL")
    p.add_argument("--token-env", default="AGENTPEN_TOKEN", help="variable holding the bearer token")
    p.add_argument("--image", required=True, help="pinned image of the grader and the workspaces")
    p.add_argument("--oracles", required=True, help="the testdata/oracles directory")
    p.add_argument("--campaign", required=True, help="campaign id")
    p.add_argument("--result", help="write the results as JSON to this file")
    p.add_argument("tasks", nargs="+", help="TASK_ID=ANSWER_KIND")
    a = p.parse_args(argv)
    token = os.environ.get(a.token_env, "")
    if not token:
        p.error(f"${a.token_env} is not set")
    api = Client(a.api, token, timeout=300)

    kinds = dict(t.partition("=")[::2] for t in a.tasks)
    spec = {
        "campaign_id": a.campaign,
        "server": {"image": a.image},
        "workspaces": [{"task_id": t, "image": a.image} for t in kinds],
    }
    campaign = api.create(spec)
    cid = campaign["campaign_id"]
    log(f"campaign {cid} ready: {len(campaign['workspaces'])} workspaces, attestation ok={campaign['attestation']['ok']}")
    rows, ok = [], True
    attestation_ok, cleanup, cleanup_error = False, "not attempted", ""
    try:
        for w in campaign["workspaces"]:
            row = play(w, kinds, a.oracles)
            rows.append(row)
            ok = ok and row["reward"] == 1.0
        try:
            attestation = api.attestation(cid)
            attestation_ok = attestation["ok"] is True
            log(f"attestation: ok={attestation['ok']} ({len(attestation['failed_checks'])} failed checks)")
        except AgentpenError as e:
            log(f"attestation: not read: {e}")
    finally:
        try:
            cleanup = api.delete(cid)["status"]
        except AgentpenError as e:
            cleanup, cleanup_error = "failed", str(e)
        log(f"cleanup: {cleanup}" + (f" ({cleanup_error})" if cleanup_error else ""))
        cleanup_path = cleanup_report(api, cid)
    ok = ok and attestation_ok and cleanup == "verified"
    result = {
        "schema": "agentpen.demo.v1",
        "ok": ok,
        "campaign_id": cid,
        "workspaces": rows,
        "attestation": {"ok": attestation_ok, "report": campaign["attestation"]["path"]},
        "cleanup": {
            "status": cleanup,
            "report": cleanup_path,
            "error": cleanup_error,
        },
    }
    if a.result:
        write_json(a.result, result)
    print_table(result)
    return 0 if ok else 1


def play(w, kinds, oracles):
    """One oracle episode in workspace w through its base_url; a row of the table. An error
    is the row's (reward 0.0), so one broken workspace does not hide the others."""
    task = w["task_id"]
    row = {"agent_id": w["agent_id"], "task_id": task, "reward": 0.0, "steps": 0, "error": ""}
    family = task.partition("@")[0]
    try:
        with open(os.path.join(oracles, family + ".py"), encoding="utf-8") as fh:
            oracle = fh.read()
        # base_url is all an OpenEnv client needs; the proxy serves the workspace's task.
        client = workbench_client.EnvClient(url=w["base_url"])
        try:
            result = workbench_client.play(client, task, kinds[task], oracle)
            row["reward"] = float(result["reward"])
            row["steps"] = client.state()["step_count"]
        finally:
            client.close()
    except (OSError, AgentpenError, KeyError, ValueError) as e:
        row["error"] = str(e)
        log(f"{task}: episode failed: {e}")
    return row


def cleanup_report(api, cid):
    """The cleanup report's file, as the campaign's view names it (each cleanup has a file of
    its own in the state directory); "" when the service cannot say."""
    try:
        return (api.get(cid).get("cleanup") or {}).get("path", "")
    except AgentpenError as e:
        log(f"cleanup report: not known: {e}")
        return ""


def print_table(result):
    print(f"{'workspace':<32} {'task':<28} {'reward':>6} {'steps':>5}")
    for r in result["workspaces"]:
        print(f"{r['agent_id']:<32} {r['task_id']:<28} {r['reward']:>6.1f} {r['steps']:>5}")
    print(f"attestation report: {result['attestation']['report']}")
    print(f"cleanup report:     {result['cleanup']['report']}")
    print(f"cleanup:            {result['cleanup']['status']}")


def write_json(path, value):
    """Write value to path whole: a reader never sees half a file."""
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(value, fh, indent=2)
        fh.write("\n")
    os.replace(tmp, path)


def log(msg):
    print(f"demo: {msg}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except APIError as e:
        print(f"demo: the API refused: {e}", file=sys.stderr)
        sys.exit(1)
    except AgentpenError as e:
        print(f"demo: {e}", file=sys.stderr)
        sys.exit(1)
