import os
import re

trace = re.search(r"did trace (\S+) reach", INSTRUCTION).group(1)
first = {}
for name in os.listdir("logs"):
    with open(os.path.join("logs", name)) as fh:
        for line in fh:
            stamp, trace_field = line.split(" ", 2)[:2]
            if trace_field == "trace=" + trace:
                service = name[: -len(".log")]
                first[service] = min(first.get(service, stamp), stamp)
print(", ".join(sorted(first, key=first.get)))
