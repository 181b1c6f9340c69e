# solution.py: keeps state between graded calls, and hands it to later
# episodes of other uids, in the kernel's key retention service, which
# outlives every process: each call adds a key to the uid's user keyring
# (readable by anyone), and a call that finds an earlier call's key
# answers wrongly. Run as a script in another episode, it reads every such
# key it can see in /proc/keys.
import ctypes, os, platform

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
SYS_ADD_KEY, SYS_KEYCTL = {"x86_64": (248, 250), "aarch64": (217, 219)}[platform.machine()]
KEY_SPEC_USER_KEYRING = -4
KEYCTL_SETPERM, KEYCTL_SET_TIMEOUT, KEYCTL_SEARCH, KEYCTL_READ = 5, 15, 10, 11
ALL_PERMS = 0x3F3F3F3F
PREFIX = b"agentpen-leak-"


def _mark(values):
    """True when an earlier call left its key."""
    found = _libc.syscall(SYS_KEYCTL, KEYCTL_SEARCH, KEY_SPEC_USER_KEYRING, b"user", PREFIX + b"mark", 0)
    payload = repr(values).encode()
    for desc in (PREFIX + b"mark", PREFIX + b"case-" + str(os.getpid()).encode()):
        key = _libc.syscall(SYS_ADD_KEY, b"user", desc, payload, len(payload), KEY_SPEC_USER_KEYRING)
        if key > 0:
            _libc.syscall(SYS_KEYCTL, KEYCTL_SETPERM, key, ALL_PERMS)
            # Gone by itself a minute later, so a run on unfixed code does
            # not leave keys behind for the next test run.
            _libc.syscall(SYS_KEYCTL, KEYCTL_SET_TIMEOUT, key, 60)
    return found > 0


def median(values):
    if _mark(values):
        return -12345
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


if __name__ == "__main__":
    read = 0
    with open("/proc/keys") as fh:
        for line in fh:
            f = line.split()
            if len(f) > 8 and f[8].startswith(PREFIX.decode()):
                buf = ctypes.create_string_buffer(4096)
                n = _libc.syscall(SYS_KEYCTL, KEYCTL_READ, int(f[0], 16), buf, 4096)
                if n > 0:
                    read += 1
                    print("LEAKED", f[8], buf.raw[:n].decode(errors="replace"))
    print("read", read, "keys of other episodes")
