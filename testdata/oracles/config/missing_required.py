import json


def parse_yaml(text):
    """Block mappings of scalars; comments, list items and --- skipped."""
    root = {}
    stack = [(-1, root)]
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or line.startswith("-"):
            continue
        indent = len(raw) - len(raw.lstrip())
        key, _, value = line.partition(":")
        while stack[-1][0] >= indent:
            stack.pop()
        if value.strip():
            stack[-1][1][key.strip()] = value.strip()
        else:
            child = {}
            stack[-1][1][key.strip()] = child
            stack.append((indent, child))
    return root


with open("schema.json") as fh:
    required = json.load(fh)["required"]
with open("config/production.yaml") as fh:
    prod = parse_yaml(fh.read())
missing = []
for path in required:
    node = prod
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    if node is None:
        missing.append(path)
print(", ".join(missing))
