import csv
from collections import Counter

with open("users.csv", newline="") as fh:
    counts = Counter(row["email"].strip().lower() for row in csv.DictReader(fh))
print(", ".join(sorted(email for email, n in counts.items() if n > 1)))
