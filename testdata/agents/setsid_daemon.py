# A double-forked, setsid daemon that outlives the run and keeps writing.
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        for fd in (0, 1, 2):
            os.close(fd)
        while True:
            with open("/tmp/daemon-alive", "a") as fh:
                fh.write("x")
            time.sleep(0.05)
    os._exit(0)
print("daemon started")
