# Fork until the kernel refuses; every child keeps forking.
import os, time
n = 0
for _ in range(10000):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        while True:
            try:
                os.fork()
            except OSError:
                time.sleep(0.01)
    n += 1
print("forked", n)
