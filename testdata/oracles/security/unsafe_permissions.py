import re

allowed = set(re.findall(r"no setuid or setgid file except (\S+?)\.? A symlink", INSTRUCTION))
flagged, current = [], None
for line in open("listing.txt"):
    line = line.rstrip("\n")
    if line.endswith(":") and line.startswith("/"):
        current = line[:-1]
        continue
    parts = line.split(None, 8)
    if len(parts) < 9 or not re.match(r"[-dlcbps][-rwxsStT]{9}$", parts[0]):
        continue
    mode, name = parts[0], parts[8].split(" -> ")[0]
    if name in (".", ".."):
        continue
    path = f"{current}/{name}"
    if mode[0] == "l":
        continue
    bad = False
    if mode[8] == "w" and not (mode[0] == "d" and mode[9] in "tT"):
        bad = True
    if name.endswith(".env") and (mode[4] in "rw" or mode[5] == "w" or mode[7] in "rw" or mode[8] == "w"):
        bad = True
    if name.endswith(".pem") and (mode[5] == "w" or mode[7] == "r" or mode[8] == "w"):
        bad = True
    if mode[0] == "-" and (mode[3] in "sS" or mode[6] in "sS") and path not in allowed:
        bad = True
    if bad:
        flagged.append(path)
print(", ".join(flagged))
