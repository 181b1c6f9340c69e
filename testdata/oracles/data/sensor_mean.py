import csv
import re

sensor = re.search(r'of sensor "([^"]+)"', INSTRUCTION).group(1)
values = []
with open("readings.csv", newline="") as fh:
    for row in csv.DictReader(fh):
        cell = row["temperature_c"].strip()
        if row["sensor"] == sensor and cell not in ("", "NA", "null"):
            values.append(float(cell))
print(f"{sum(values) / len(values):.2f}")
