from collections import Counter

with open("access.log") as fh:
    counts = Counter(line.split(" ", 1)[0] for line in fh if line.strip())
print(", ".join(ip for ip, _ in counts.most_common(3)))
