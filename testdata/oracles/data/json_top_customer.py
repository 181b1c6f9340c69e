import json
from collections import defaultdict
from decimal import Decimal

with open("orders.json") as fh:
    orders = json.load(fh)["orders"]
totals = defaultdict(Decimal)
for order in orders:
    if order["status"] != "paid":
        continue
    for item in order["items"]:
        totals[order["customer"]] += item["qty"] * Decimal(item["unit_price"])
print(max(totals, key=totals.get))
