import json
import re

def norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()

def ver(v):
    return tuple(int(p) for p in v.strip().split("."))

def affected(v, spec):
    for cond in spec.split(","):
        cond = cond.strip()
        for op, test in ((">=", lambda a, b: a >= b), ("<=", lambda a, b: a <= b), (">", lambda a, b: a > b),
                         ("<", lambda a, b: a < b), ("==", lambda a, b: a == b)):
            if cond.startswith(op):
                if not test(v, ver(cond[len(op):])):
                    return False
                break
    return True

advisories = json.load(open("advisories.json"))["advisories"]
out = []
for line in open("requirements.txt"):
    line = line.split("#", 1)[0].strip()
    if "==" not in line:
        continue
    name, version = line.split("==", 1)
    if any(norm(a["package"]) == norm(name) and affected(ver(version), a["affected"]) for a in advisories):
        out.append(name.strip())
print(", ".join(out))
