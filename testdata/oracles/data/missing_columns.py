import csv

MISSING = {"", "NA", "N/A", "null"}
with open("patients.csv", newline="") as fh:
    reader = csv.DictReader(fh)
    columns = reader.fieldnames
    holes = set()
    for row in reader:
        holes.update(c for c in columns if row[c].strip() in MISSING)
print(", ".join(c for c in columns if c in holes))
