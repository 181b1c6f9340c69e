import re
from datetime import datetime, timedelta

end_day = datetime.strptime(re.search(r"by the end of (\d{4}-\d{2}-\d{2})", INSTRUCTION).group(1), "%Y-%m-%d")
limit = end_day + timedelta(days=1)
certs, cn = [], None
for line in open("certs.txt"):
    if line.startswith("subject="):
        cn = re.search(r"CN\s*=\s*([^,\n]+)", line).group(1).strip()
    elif line.startswith("notAfter="):
        when = datetime.strptime(" ".join(line[len("notAfter="):].split()[:4]), "%b %d %H:%M:%S %Y")
        if when < limit:
            certs.append((when, cn))
print(", ".join(cn for _, cn in sorted(certs)))
