# 10 MB on stdout.
import sys
chunk = "y" * 1000 + "\n"
for _ in range(10 * 1000):
    sys.stdout.write(chunk)
