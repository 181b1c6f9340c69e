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
os.kill(-1, signal.SIGKILL)
