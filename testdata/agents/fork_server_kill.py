# Go after the fork server from a run: every process of this uid but this
# one (the server's are in /proc), or {{TARGET_PIDS}} when the test sets
# them (another episode's server: another uid shows as the overflow uid
# here), is sent SIGKILL, SIGSTOP and SIGTERM (by pid and through a /proc
# descriptor), reniced, limited, traced, written into and offered to the
# OOM killer; its namespaces are joined through /proc/<pid>/ns, and its
# descriptors, environment and memory read through /proc; then the parent
# and everyone (kill(-1)). Nothing may reach them: the run ends normally
# and the next run comes from the same server. A spawned run of the uid
# beside the server owns the server's user namespace from its parent, so
# it holds every capability in it: the filter (setns), /proc's modes and
# the PID namespaces must stop it all the same.
import ctypes, os, resource, signal
libc = ctypes.CDLL(None, use_errno=True)
def status(pid, key):
    for l in open("/proc/%s/status" % pid):
        if l.startswith(key + ":"):
            return l.split()[1:]
    return []
me = os.getuid()
self_pid = int(os.readlink("/proc/self"))
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
given = "{{TARGET_PIDS}}"
if not given.startswith("{{"):
    targets = [int(p) for p in given.split(",")]
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
# A read reaches something only when it reads a byte: a process that is
# exiting has no memory left, and the kernel lets its uid open what its
# /proc holds of it, which reads empty.
def read(path):
    with open(path, "rb") as f:
        return f.read(1) or False
def setns(pid, ns):
    if os.readlink("/proc/%d/ns/%s" % (pid, ns)) == os.readlink("/proc/self/ns/" + ns):
        return False  # one this run is in already
    fd = os.open("/proc/%d/ns/%s" % (pid, ns), os.O_RDONLY)
    try:
        return libc.setns(fd, 0) == 0
    finally:
        os.close(fd)
def read_mem(pid):
    with open("/proc/%d/maps" % pid) as m:
        first = m.readline()
    if not first:
        return False
    with open("/proc/%d/mem" % pid, "rb") as f:
        f.seek(int(first.split("-")[0], 16))
        return f.read(1) or False
def fds(pid):
    for fd in os.listdir("/proc/%d/fd" % pid):
        for mode in (os.O_RDONLY, os.O_WRONLY):
            try:
                os.close(os.open("/proc/%d/fd/%s" % (pid, fd), mode | os.O_NONBLOCK))
                return True
            except OSError:
                pass
    return False
for pid in targets:
    for sig in (signal.SIGSTOP, signal.SIGTERM, signal.SIGKILL):
        attempt("kill %d %d" % (pid, sig), lambda: os.kill(pid, sig))
        attempt("pidfd %d %d" % (pid, sig), lambda: pidfd_signal(pid, sig))
    attempt("setpriority %d" % pid, lambda: os.setpriority(os.PRIO_PROCESS, pid, 19))
    attempt("prlimit %d" % pid, lambda: resource.prlimit(pid, resource.RLIMIT_NOFILE, (1, 1)))
    attempt("ptrace %d" % pid, lambda: libc.ptrace(16, pid, 0, 0) == 0)
    attempt("mem %d" % pid, lambda: write("/proc/%d/mem" % pid, b"x"))
    attempt("oom %d" % pid, lambda: write("/proc/%d/oom_score_adj" % pid, b"1000"))
    for ns in ("user", "pid", "ipc", "mnt", "net", "uts", "cgroup"):
        attempt("setns %d %s" % (pid, ns), lambda: setns(pid, ns))
    attempt("environ %d" % pid, lambda: read("/proc/%d/environ" % pid))
    attempt("mem %d read" % pid, lambda: read_mem(pid))
    attempt("fds %d" % pid, lambda: fds(pid))
attempt("kill parent", lambda: os.getppid() != 0 and os.kill(os.getppid(), signal.SIGKILL))
attempt("kill -1", lambda: os.kill(-1, signal.SIGKILL))
# The whole uid, which the kernel takes as the processes this one sees.
try:
    os.setpriority(os.PRIO_USER, me, 19)
except OSError:
    pass
print("reached", reached)
