import configparser
import json
import os
import tomllib

TRUE = {"true", "yes", "on", "1"}


def app_section(path):
    with open(path, "rb") as fh:
        data = fh.read()
    if path.endswith(".json"):
        return json.loads(data)["app"]
    if path.endswith(".toml"):
        return tomllib.loads(data.decode())["app"]
    if path.endswith(".ini"):
        cp = configparser.ConfigParser()
        cp.read_string(data.decode())
        return dict(cp["app"])
    app, inside = {}, False  # YAML: the keys indented under "app:"
    for raw in data.decode().splitlines():
        if raw.startswith("#") or not raw.strip():
            continue
        if not raw.startswith(" "):
            inside = raw.strip() == "app:"
        elif inside:
            key, _, value = raw.strip().partition(":")
            app[key] = value.strip().strip("\"'")
    return app


hits = []
for name in sorted(os.listdir("configs")):
    app = app_section(os.path.join("configs", name))
    if str(app["environment"]).lower() == "production" and str(app["debug"]).lower() in TRUE:
        hits.append(name)
print(", ".join(hits))
