import json

data = json.load(open("security_groups.json"))
bad = []
for group in data["security_groups"]:
    for rule in group["ingress"]:
        if rule["cidr"] not in ("0.0.0.0/0", "::/0"):
            continue
        ports = set(range(rule["from_port"], rule["to_port"] + 1))
        if rule["protocol"] != "tcp" or not ports <= {80, 443}:
            bad.append(rule["rule_id"])
print(", ".join(bad))
