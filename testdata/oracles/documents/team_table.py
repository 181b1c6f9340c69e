import re

team = re.search(r"Among the (.+?) team members", INSTRUCTION).group(1)
rows = []
for line in open("team.md", encoding="utf-8"):
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) == 5 and re.match(r"\d{4}-\d{2}-\d{2}$", cells[3]):
        rows.append(cells)
eligible = [c for c in rows if c[1] == team and c[2] in ("Engineer", "Senior Engineer")]
print(min(eligible, key=lambda c: c[3])[0])
