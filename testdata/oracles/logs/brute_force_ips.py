import re
from collections import Counter

threshold = int(re.search(r"have (\d+) or more failed", INSTRUCTION).group(1))
failures = Counter()
with open("auth.log") as fh:
    for line in fh:
        m = re.search(r"Failed password for (?:invalid user )?\S+ from (\S+) port", line)
        if m:
            failures[m.group(1)] += 1
print(", ".join(ip for ip, n in failures.items() if n >= threshold))
