import os
import re


def parse_yaml(text):
    """Block mappings of scalars; comments and list items skipped."""
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


namespace = re.search(r'in namespace "([^"]+)"', INSTRUCTION).group(1)
total = 0
for name in sorted(os.listdir("k8s")):
    with open(os.path.join("k8s", name)) as fh:
        for doc in re.split(r"^---\s*$", fh.read(), flags=re.M):
            m = parse_yaml(doc)
            if m.get("kind") == "Deployment" and m["metadata"]["namespace"] == namespace:
                total += int(m["spec"]["replicas"])
print(total)
