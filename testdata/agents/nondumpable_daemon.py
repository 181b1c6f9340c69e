# A daemon that makes itself non-dumpable, so /proc/<pid> belongs to root.
import ctypes, os, time
PR_SET_DUMPABLE = 4
if os.fork() == 0:
    os.setsid()
    ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    if os.fork() == 0:
        ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        for fd in (0, 1, 2):
            os.close(fd)
        while True:
            time.sleep(1)
    os._exit(0)
print("hidden daemon started")
