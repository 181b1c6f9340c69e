import re

date = re.search(r"held on (\d{4}-\d{2}-\d{2})", INSTRUCTION).group(1)
text = open("minutes.md", encoding="utf-8").read()
meetings = re.split(r"^## ", text, flags=re.M)[1:]
meeting = next(m for m in meetings if m.splitlines()[0].endswith(date))
actions = meeting.split("### Action items", 1)[1]
owners = re.findall(r"^- \[ \] \*\*(.+?)\*\*:", actions, flags=re.M)
print(", ".join(dict.fromkeys(owners)))
