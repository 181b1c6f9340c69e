import csv
import json

with open("customers.csv", newline="") as fh:
    known = {row["customer_id"] for row in csv.DictReader(fh)}
with open("orders.json") as fh:
    orders = json.load(fh)
print(", ".join(o["id"] for o in orders if o["customer_id"] not in known))
