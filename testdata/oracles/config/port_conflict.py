import configparser
import json
import os
import tomllib
from collections import Counter


def port_of(path):
    with open(path) as fh:
        text = fh.read()
    if path.endswith(".json"):
        found = []

        def walk(node):
            for key, value in node.items():
                if isinstance(value, dict):
                    walk(value)
                elif key == "port":
                    found.append(value)

        walk(json.loads(text))
        return found[0]
    if path.endswith(".toml"):
        return next(t["port"] for t in tomllib.loads(text).values() if isinstance(t, dict) and "port" in t)
    if path.endswith(".ini"):
        cp = configparser.ConfigParser()
        cp.read_string(text)
        return int(next(cp[s]["port"] for s in cp.sections() if "port" in cp[s]))
    for line in text.splitlines():  # YAML and env: an uncommented port line
        line = line.strip()
        if line.startswith("#"):
            continue
        key, sep, value = line.partition(":" if path.endswith(".yaml") else "=")
        if sep and key.strip() in ("port", "PORT"):
            return int(value)


ports = {os.path.splitext(name)[0]: port_of(os.path.join("services", name)) for name in os.listdir("services")}
counts = Counter(ports.values())
print(", ".join(sorted(name for name, port in ports.items() if counts[port] > 1)))
