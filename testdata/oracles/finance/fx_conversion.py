import csv
import re

base = re.search(r"how many (\w+) one unit", INSTRUCTION).group(1)
who = re.search(r"Convert each of (.+?)'s expenses", INSTRUCTION).group(1)
rates = {}
with open("rates.csv", newline="") as fh:
    for row in csv.DictReader(fh):
        rates[(row["month"], row["currency"])] = float(row["rate_to_" + base])
total = 0.0
with open("expenses.csv", newline="") as fh:
    for row in csv.DictReader(fh):
        if row["employee"] != who:
            continue
        rate = 1.0 if row["currency"] == base else rates[(row["date"][:7], row["currency"])]
        total += float(row["amount"]) * rate
print(f"{total:.2f}")
