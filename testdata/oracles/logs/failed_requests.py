import re

LINE = re.compile(r'^\S+ \S+ \S+ \[[^\]]+\] "[^"]*" (\d{3}) \S+ "[^"]*" "[^"]*" (\S+)$')
failed = []
with open("access.log") as fh:
    for line in fh:
        m = LINE.match(line.rstrip("\n"))
        if m and 500 <= int(m.group(1)) <= 599:
            failed.append(m.group(2))
print(", ".join(failed))
