import csv
import re
from datetime import date, timedelta

as_of = date.fromisoformat(re.search(r"As of (\d{4}-\d{2}-\d{2})", INSTRUCTION).group(1))
days = int(re.search(r"more than (\d+) days past", INSTRUCTION).group(1))
total = 0
with open("invoices.csv", newline="") as fh:
    for row in csv.DictReader(fh):
        due = date.fromisoformat(row["issue_date"]) + timedelta(days=int(row["terms_days"]))
        if (as_of - due).days > days:
            total += round(float(row["amount"]) * 100) - round(float(row["paid"]) * 100)
print(f"{total / 100:.2f}")
