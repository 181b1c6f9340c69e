import json
import math
import re

route, method = re.search(r'route "([^"]+)" with method "([^"]+)"', INSTRUCTION).groups()
values = []
with open("requests.jsonl") as fh:
    for line in fh:
        req = json.loads(line)
        if req["route"] == route and req["method"] == method:
            values.append(req["latency_ms"])
values.sort()
print(values[math.ceil(0.95 * len(values)) - 1])
