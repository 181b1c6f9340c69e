#!/usr/bin/env python3
"""The oracle player: the workbench's episodes solved with testdata/oracles'
answers, through agentpen_client's episode client (clients/python: OpenEnv's
WebSocket at <base>/ws, the standard library only).

Run as a script, it plays one episode per task given on the command line with
the oracle answers of testdata/oracles (see its README) and prints one line
per episode, "<task_id> reward=<reward> steps=<n>", then a JSON summary line.

    workbench_client.py --url http://127.0.0.1:8000 --oracles testdata/oracles \
        data/csv_region_total=number software/median=code
    workbench_client.py --unix /run/workbench/wb.sock ...

It imports agentpen_client from this tree (clients/python), not from wherever
one is installed, so the tests that run it test the tree's client.
"""

import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__)))), "clients", "python"))
from agentpen_client import EpisodeClient, health  # noqa: E402
from agentpen_client.errors import AgentpenError  # noqa: E402


def EnvClient(url=None, unix=None, timeout=60.0):
    """An episode session on url (a base_url) or the unix socket unix."""
    return EpisodeClient(url, unix=unix, timeout=timeout)


def _last_line(output):
    """The last line a run_python script printed, without the exit-code trailer."""
    lines = [ln for ln in output.strip().splitlines() if ln.strip()]
    if lines and re.fullmatch(r"\[exit code -?\d+\]", lines[-1].strip()):
        lines = lines[:-1]
    if not lines:
        raise AgentpenError(f"the oracle printed nothing: {output!r}")
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
            raise AgentpenError(f"{task_id}: run_tests refused: {tests['observation']['error']}")
        result = client.step("submit", answer="fixed")
    else:
        run = client.step("run_python", code="INSTRUCTION = " + json.dumps(instruction) + "\n" + oracle)
        answer = _last_line(run["observation"]["output"])
        client.step("check", answer=answer)
        result = client.step("submit", answer=answer)
    if not result["done"]:
        raise AgentpenError(f"{task_id}: submit did not end the episode: {result}")
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
    status, body = health(a.url, a.unix)
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
