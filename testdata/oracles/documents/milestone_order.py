import re
from datetime import datetime

FORMATS = ["%Y-%m-%d", "%d %B %Y", "%B %d, %Y", "%a %d %b %Y"]

def parse(s):
    for f in FORMATS:
        try:
            return datetime.strptime(s, f)
        except ValueError:
            pass
    raise ValueError(s)

text = open("report.md", encoding="utf-8").read()
schedule = text.split("## Schedule", 1)[1].split("## Risks", 1)[0]
found = []
for m in re.finditer(r"\*\*(.+?)\*\*[^*]*? on ([A-Z][a-z]{2} \d{1,2} [A-Z][a-z]{2} \d{4}|\d{4}-\d{2}-\d{2}|\d{1,2} [A-Z][a-z]+ \d{4}|[A-Z][a-z]+ \d{1,2}, \d{4})", schedule):
    found.append((parse(m.group(2)), m.group(1)))
print(", ".join(name for _, name in sorted(found)))
