# Signal the workbench, PID 1 and everyone else.
import errno, os, signal, sys
for pid in ({{SERVER_PID}}, 1):
    for sig in (signal.SIGTERM, signal.SIGKILL, signal.SIGSTOP):
        try:
            os.kill(pid, sig)
            print("SENT", pid, sig)
        except OSError as e:
            print("DENIED", pid, int(sig), errno.errorcode[e.errno])
sys.stdout.flush()
# Everything of the uid but this process.
try:
    os.kill(-1, signal.SIGKILL)
    print("SENT -1")
except OSError as e:
    print("DENIED -1", errno.errorcode[e.errno])
# Still running: the run's init (pid 1) did not die or stop with it.
print("after", os.getpid())
