import re

text = open("design.md", encoding="utf-8").read()
used = set(re.findall(r"\b[A-Z]{2,5}\b", text))
defined = set(re.findall(r"[a-z,\-]+ \(([A-Z]{2,5})\)", text))
print(", ".join(sorted(used - defined)))
