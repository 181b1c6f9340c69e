# Open files until the kernel refuses.
import os
fds = []
try:
    while True:
        fds.append(os.open("/dev/null", os.O_RDONLY))
except OSError as exc:
    print("open files", len(fds), "errno", exc.errno)
