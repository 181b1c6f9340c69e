import csv

with open("payments.csv", newline="") as fh:
    rows = list(enumerate(csv.DictReader(fh)))
rows.sort(key=lambda p: (p[1]["date"], p[0]))
seen, dups = set(), []
for _, row in rows:
    key = (row["vendor"].strip().lower(), row["invoice_no"].strip(), round(float(row["amount"]) * 100))
    if key in seen:
        dups.append(row["payment_id"])
    seen.add(key)
print(", ".join(dups))
