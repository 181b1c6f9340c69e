import csv
import re
from decimal import Decimal

category = re.search(r'of category "([^"]+)"', INSTRUCTION).group(1)


def total(path):
    with open(path, newline="") as fh:
        return sum(Decimal(r["net_amount"]) for r in csv.DictReader(fh) if r["category"] == category)


q1, q2 = total("q1.csv"), total("q2.csv")
print(f"{(q2 - q1) / q1 * 100:.2f}")
