import re

lo, hi = re.search(r"from (\d+\.\d+\.\d+) to (\d+\.\d+\.\d+)", INSTRUCTION).groups()
key = lambda v: tuple(int(x) for x in v.split("."))
text = open("CHANGELOG.md", encoding="utf-8").read()
out = []
for block in re.split(r"^## ", text, flags=re.M)[1:]:
    m = re.match(r"\[(\d+\.\d+\.\d+)\]", block)
    if not m or not key(lo) <= key(m.group(1)) <= key(hi):
        continue
    if re.search(r"^### Breaking changes", block, re.M) or re.search(r"^- BREAKING:", block, re.M):
        out.append(m.group(1))
print(", ".join(out))
