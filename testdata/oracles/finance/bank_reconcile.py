import csv
import re

def cents(s):
    return round(float(s) * 100) if s.strip() else 0

with open("ledger.csv", newline="") as fh:
    ledger = list(csv.DictReader(fh))
refs = {row["ref"] for row in ledger}
seen = {}
with open("bank_statement.csv", newline="") as fh:
    for row in csv.DictReader(fh):
        amount = cents(row["deposit"]) - cents(row["withdrawal"])
        for token in re.findall(r"[A-Z]+-\d+", row["description"]):
            if token in refs:
                seen.setdefault(token, []).append(amount)
out = [row["ref"] for row in ledger if cents(row["amount"]) not in seen.get(row["ref"], [])]
print(", ".join(out))
