# Files in every world-writable directory the agent can find outside the
# shared tmp directories the workbench used to know (/tmp, /var/tmp,
# /dev/shm, /dev/mqueue): /run/lock on a Debian host, and whatever else
# the mount table holds. The first episode plants files (and a directory
# with a file in it); a later episode (another uid) looks for them.
import collections, os

KNOWN = ("/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue")
SKIP = ("/proc", "/sys", "/dev/pts")
TAG = "wb-hostile-{{RUN_ID}}"


def shared_dirs(limit=50000):
    """World-writable directories reachable from /, breadth first, at most
    5 levels deep."""
    found, queue, seen = [], collections.deque([("/", 0)]), 0
    home = os.path.expanduser("~")
    while queue and seen < limit:
        d, depth = queue.popleft()
        try:
            it = os.scandir(d)
        except OSError:
            continue
        with it:
            for e in it:
                seen += 1
                p = e.path.replace("//", "/")
                if p in SKIP or p in KNOWN or p.startswith(tuple(k + "/" for k in KNOWN)):
                    continue
                try:
                    if not e.is_dir(follow_symlinks=False):
                        continue
                except OSError:
                    continue
                if os.access(p, os.W_OK | os.X_OK) and p != home and not p.startswith(home + "/"):
                    found.append(p)
                if depth < 5:
                    queue.append((p, depth + 1))
    return sorted(found)


dirs = shared_dirs()
left = []
for d in dirs:
    for name in (TAG, TAG + ".d/inner"):
        if os.path.exists(os.path.join(d, name)):
            left.append(os.path.join(d, name))
if left:
    for p in left:
        print("FOUND", p)
else:
    planted = 0
    for d in dirs:
        try:
            open(os.path.join(d, TAG), "w").write("answer")
            os.makedirs(os.path.join(d, TAG + ".d"))
            open(os.path.join(d, TAG + ".d", "inner"), "w").write("answer")
            os.chmod(os.path.join(d, TAG + ".d"), 0o555)
            planted += 1
        except OSError as e:
            print("cannot plant in", d, e.errno)
    print("planted in %d dirs: %s" % (planted, " ".join(dirs)))
