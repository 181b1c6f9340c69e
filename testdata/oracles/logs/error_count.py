import re
from datetime import datetime

service = re.search(r'did the "([^"]+)" service', INSTRUCTION).group(1)
start, end = re.search(r"from (\S+ \S+) \(included\) to (\S+ \S+) \(excluded\)", INSTRUCTION).groups()
start, end = datetime.fromisoformat(start), datetime.fromisoformat(end)
count = 0
with open("app.log") as fh:
    for line in fh:
        stamp, _host, proc, level, _ = line.split(" ", 4)
        at = datetime.fromisoformat(stamp.rstrip("Z"))
        if proc.split("[")[0] == service and level == "ERROR" and start <= at < end:
            count += 1
print(count)
