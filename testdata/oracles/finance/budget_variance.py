import csv
import re
from collections import defaultdict

year, q = map(int, re.search(r"in (\d{4})-Q(\d)", INSTRUCTION).groups())
budget = {}
with open("budget.csv", newline="") as fh:
    for row in csv.DictReader(fh):
        if row["quarter"] == f"{year}-Q{q}":
            budget[row["department"]] = round(float(row["budget"]) * 100)
spent = defaultdict(int)
with open("expenses.csv", newline="") as fh:
    for row in csv.DictReader(fh):
        y, m, _ = map(int, row["date"].split("-"))
        if y == year and (m - 1) // 3 + 1 == q:
            spent[row["department"]] += round(float(row["amount"]) * 100)
over = [(spent[d] - b, d) for d, b in budget.items() if spent[d] > b]
print(", ".join(d for _, d in sorted(over, reverse=True)))
