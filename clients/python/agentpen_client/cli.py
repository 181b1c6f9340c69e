"""agentpen-client: the launcher API and the episode client on the command line.

    agentpen-client [--url URL] COMMAND ...

The service's URL is --url, else $AGENTPEN_URL, else http://127.0.0.1:8700; the
bearer token is $AGENTPEN_TOKEN (never an argument). Answers are printed as
JSON on stdout (events and play: one line each); an error answer is printed on
stderr with the service's problem and exits 1; bad usage exits 2.
"""

import argparse
import json
import sys
import time

from . import __version__
from .api import Client
from .episode import EpisodeClient
from .errors import AgentpenError


def _parser():
    p = argparse.ArgumentParser(prog="agentpen-client", description=__doc__.split("\n\n")[0],
                                epilog="The token is read from $AGENTPEN_TOKEN; the URL from --url or $AGENTPEN_URL.")
    p.add_argument("--url", help="agentpen serve's URL (default $AGENTPEN_URL, else http://127.0.0.1:8700)")
    p.add_argument("--version", action="version", version="agentpen-client " + __version__)
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    def cmd(name, help, *ids):
        c = sub.add_parser(name, help=help, description=help)
        for i in ids:
            c.add_argument(i)
        return c

    c = cmd("create", "create a campaign from a spec (JSON; - for stdin) and print it once up and attested", "spec")
    c.add_argument("--async", dest="async_", action="store_true", help="answer at once (202), the campaign reading creating")
    c.add_argument("--launcher-timeout", type=int, metavar="SECONDS", help="tie it to this launcher (launcher_timeout_seconds)")
    cmd("list", "list the campaigns this token created")
    cmd("get", "print a campaign", "id")
    cmd("wait", "follow a campaign's events to its first state; exit 0 when it is ready", "id")
    c = cmd("events", "print a campaign's events, one JSON line each, while it lives (resuming a dropped connection)", "id")
    c.add_argument("--last-event-id", help="start after this event's id")
    c.add_argument("--until-state", action="store_true", help="stop after the first state event")
    c = cmd("claim", "bind a task to a workspace of the campaign's pool; print the claim (its base_url)", "id", "task_id")
    c.add_argument("--attempt", help="the attempt id (a task and attempt is claimed once)")
    c = cmd("patch", "change a campaign's lifetime", "id")
    c.add_argument("--ttl", type=int, metavar="SECONDS", help="ttl_seconds, from its create's acceptance (0: none)")
    c.add_argument("--idle", type=int, metavar="SECONDS", help="idle_timeout_seconds (0: none)")
    c.add_argument("--launcher-timeout", type=int, metavar="SECONDS", help="launcher_timeout_seconds (0: not tied)")
    c = cmd("keepalive", "say this launcher is still there (a campaign tied to it)", "id")
    c.add_argument("--every", type=float, metavar="SECONDS", help="again every SECONDS until interrupted")
    cmd("workspaces", "print a ready campaign's workspaces and base_urls", "id")
    cmd("attest", "attest a campaign now; print the report", "id")
    cmd("attestation", "print the stored attestation report", "id")
    cmd("cleanup", "print the stored cleanup report", "id")
    c = cmd("episodes", "print a campaign's episode results", "id")
    c.add_argument("--workspace", type=int, help="one workspace's (its index)")
    cmd("delete", "remove a campaign; print the verified cleanup report", "id")
    c = cmd("tasks", "print the task catalogue, or one task as an agent sees it")
    c.add_argument("task_id", nargs="?")
    cmd("images", "print the images a spec can name")
    c = cmd("play", "play an episode through a base_url: one command a line on stdin (reset, step TOOL [JSON args], state); one JSON reply a line", "base_url")
    return p


def _play(base_url, lines, out):
    with EpisodeClient(base_url) as env:
        for line in lines:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            verb, _, rest = line.partition(" ")
            if verb == "reset":
                reply = env.reset(**({"task_id": rest.strip()} if rest.strip() else {}))
            elif verb == "step":
                tool, _, args = rest.strip().partition(" ")
                reply = env.step(tool, **(json.loads(args) if args.strip() else {}))
            elif verb == "state":
                reply = env.state()
            else:
                raise ValueError("unknown command %r (reset, step TOOL [JSON], state)" % verb)
            print(json.dumps(reply), file=out, flush=True)


def main(argv=None, out=None, err=None):
    out, err = out or sys.stdout, err or sys.stderr
    a = _parser().parse_args(argv)
    c = Client(a.url)
    try:
        if a.command == "create":
            if a.spec == "-":
                spec = sys.stdin.read()
            else:
                with open(a.spec, encoding="utf-8") as fh:
                    spec = fh.read()
            res = c.create(spec, wait=not a.async_, launcher_timeout=a.launcher_timeout)
        elif a.command in ("get", "workspaces", "attest", "attestation", "cleanup", "delete"):
            res = getattr(c, a.command)(a.id)
        elif a.command == "keepalive":
            while True:
                res = c.keepalive(a.id)
                if not a.every:
                    break
                print(json.dumps(res), file=out, flush=True)
                time.sleep(a.every)
        elif a.command == "list":
            res = c.list()
        elif a.command == "wait":
            res = c.wait_ready(a.id)
        elif a.command == "events":
            for ev in c.events(a.id, a.last_event_id):
                print(json.dumps(ev), file=out, flush=True)
                if a.until_state and ev.get("event") == "state":
                    break
            return 0
        elif a.command == "claim":
            res = c.claim(a.id, a.task_id, a.attempt)
        elif a.command == "patch":
            res = c.patch(a.id, a.ttl, a.idle, a.launcher_timeout)
        elif a.command == "episodes":
            res = c.episodes(a.id, a.workspace)
        elif a.command == "tasks":
            res = c.task(a.task_id) if a.task_id else c.tasks()
        elif a.command == "images":
            res = c.images()
        elif a.command == "play":
            _play(a.base_url, sys.stdin, out)
            return 0
    except (AgentpenError, ValueError, OSError) as e:
        print("agentpen-client: %s" % e, file=err)
        return 1
    except KeyboardInterrupt:
        return 130
    print(json.dumps(res, indent=2), file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
