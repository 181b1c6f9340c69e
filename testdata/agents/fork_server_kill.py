# Go after the fork server from a run: every process of this uid but this
# one (the server's are in /proc) is sent SIGKILL, SIGSTOP and SIGTERM (by
# pid and through a /proc descriptor), reniced, limited, traced, written
# into and offered to the OOM killer; then the parent and everyone
# (kill(-1)). Nothing may reach them: the run ends normally and the next
# run comes from the same server.
import ctypes, os, resource, signal
libc = ctypes.CDLL(None, use_errno=True)
def status(pid, key):
    for l in open("/proc/%s/status" % pid):
        if l.startswith(key + ":"):
            return l.split()[1:]
    return []
me, self_pid = os.getuid(), int(os.readlink("/proc/self"))
depth = len(status("self", "NSpid"))
targets = []
for name in os.listdir("/proc"):
    if name.isdigit() and int(name) != self_pid:
        try:
            uids, nspid = status(name, "Uid"), status(name, "NSpid")
        except OSError:
            continue
        # Not this run's own init (pid 1 of this namespace): signals from
        # here are nothing to it, as signal_server.py shows.
        if uids and str(me) in uids and not (len(nspid) == depth and nspid[-1] == "1"):
            targets.append(int(name))
print("targets", len(targets))
reached = []
def attempt(what, fn):
    try:
        if fn() is not False:
            reached.append(what)
    except OSError:
        pass
def pidfd_signal(pid, sig):
    fd = os.open("/proc/%d" % pid, os.O_RDONLY | os.O_DIRECTORY)
    try:
        signal.pidfd_send_signal(fd, sig)
    finally:
        os.close(fd)
def write(path, data):
    with open(path, "wb") as f:
        f.write(data)
for pid in targets:
    for sig in (signal.SIGSTOP, signal.SIGTERM, signal.SIGKILL):
        attempt("kill %d %d" % (pid, sig), lambda: os.kill(pid, sig))
        attempt("pidfd %d %d" % (pid, sig), lambda: pidfd_signal(pid, sig))
    attempt("setpriority %d" % pid, lambda: os.setpriority(os.PRIO_PROCESS, pid, 19))
    attempt("prlimit %d" % pid, lambda: resource.prlimit(pid, resource.RLIMIT_NOFILE, (1, 1)))
    attempt("ptrace %d" % pid, lambda: libc.ptrace(16, pid, 0, 0) == 0)
    attempt("mem %d" % pid, lambda: write("/proc/%d/mem" % pid, b"x"))
    attempt("oom %d" % pid, lambda: write("/proc/%d/oom_score_adj" % pid, b"1000"))
attempt("kill parent", lambda: os.getppid() != 0 and os.kill(os.getppid(), signal.SIGKILL))
attempt("kill -1", lambda: os.kill(-1, signal.SIGKILL))
# The whole uid, which the kernel takes as the processes this one sees.
os.setpriority(os.PRIO_USER, me, 19)
print("reached", reached)
