import re
from datetime import datetime

earliest = None
for path in ("api-a.log", "api-b.log"):
    with open(path) as fh:
        for line in fh:
            stamp, level, rest = line.split(" ", 2)
            if level != "ERROR":
                continue
            at = datetime.fromisoformat(stamp)
            code = re.search(r"code=(\S+)", rest).group(1)
            if earliest is None or at < earliest[0]:
                earliest = (at, code)
print(earliest[1])
