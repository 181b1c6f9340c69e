import json
import tomllib

with open("schema.json") as fh:
    schema = json.load(fh)["properties"]
with open("settings.toml", "rb") as fh:
    settings = tomllib.load(fh)


def ok(value, kind):
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, str)


bad = [f"{s}.{k}" for s, keys in schema.items() for k, kind in keys.items() if not ok(settings[s][k], kind)]
print(", ".join(bad))
