import csv
import re

region = re.search(r'in the "([^"]+)" region', INSTRUCTION).group(1)
total = 0
with open("sales.csv", newline="") as fh:
    for row in csv.DictReader(fh):
        if row["region"] == region:
            total += round(float(row["amount"]) * 100)
print(f"{total / 100:.2f}")
