import re
import tomllib

section, key = re.search(r"effective value of (\w+)\.(\w+)\?", INSTRUCTION).groups()
with open("defaults.toml", "rb") as fh:
    value = tomllib.load(fh)[section][key]

current = None
with open("app.yaml") as fh:
    for raw in fh:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if not raw.startswith(" "):
            current = line.rstrip(":")
        elif current == section and line.split(":")[0] == key:
            value = int(line.split(":", 1)[1])

name = f"APP_{section}_{key}".upper()
with open("app.env") as fh:
    for line in fh:
        line = line.strip()
        if line and not line.startswith("#"):
            var, _, val = line.partition("=")
            if var.strip() == name:
                value = int(val)
print(value)
