# Try to write a 100 MB file.
import os
written = 0
try:
    with open("huge.bin", "wb") as fh:
        block = b"\0" * (1 << 20)
        for _ in range(100):
            fh.write(block)
            fh.flush()
            written += len(block)
except OSError as exc:
    print("stopped", exc.errno)
print("written", written)
