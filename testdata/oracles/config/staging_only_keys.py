import json


def leaves(tree, prefix=""):
    for key, value in tree.items():
        if isinstance(value, dict):
            yield from leaves(value, prefix + key + ".")
        else:
            yield prefix + key


with open("staging.json") as fh:
    staging = set(leaves(json.load(fh)))
with open("production.json") as fh:
    production = set(leaves(json.load(fh)))
print(", ".join(sorted(staging - production)))
