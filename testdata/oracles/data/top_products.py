import json
from collections import Counter

units = Counter()
with open("sales.jsonl") as fh:
    for line in fh:
        if line.strip():
            sale = json.loads(line)
            units[sale["product"]] += sale["units"]
print(", ".join(name for name, _ in units.most_common(3)))
