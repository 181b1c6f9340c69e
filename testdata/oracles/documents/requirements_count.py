import re

excluded = re.search(r'nor those in the "([^"]+)" section', INSTRUCTION).group(1)
text = open("requirements.md", encoding="utf-8").read()
count = 0
for block in re.split(r"^## ", text, flags=re.M)[1:]:
    title, _, body = block.partition("\n")
    if title.strip() == excluded:
        continue
    for line in body.splitlines():
        if not line.startswith("- ") or "(withdrawn)" in line or line.startswith("- ~~"):
            continue
        if re.search(r"\b(SHALL|MUST)\b", line):
            count += 1
print(count)
