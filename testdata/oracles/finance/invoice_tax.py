import csv
import re
from decimal import Decimal, ROUND_HALF_UP

rates = {}
with open("tax_rates.txt") as fh:
    for line in fh:
        m = re.match(r"\s*(\w+)\s*:\s*([\d.]+)\s*%", line)
        if m:
            rates[m.group(1)] = Decimal(m.group(2)) / 100
total = Decimal(0)
with open("invoice.csv", newline="") as fh:
    for row in csv.DictReader(fh):
        net = Decimal(row["qty"]) * Decimal(row["unit_price"]) * (1 - Decimal(row["discount_pct"]) / 100)
        total += net * (1 + rates[row["tax_class"]])
print(total.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))
