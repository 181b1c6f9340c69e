# Files, deep directories and locked directories in every shared tmp dir
# (read-only ones are skipped: in namespaces only the episode's own /tmp
# and /dev/shm take any).
import errno, os
for base in ("/tmp", "/var/tmp", "/dev/shm"):
    d = os.path.join(base, "litter-%d" % os.getpid())
    try:
        os.makedirs(os.path.join(d, "a", "b", "c"))
    except OSError as e:
        print(base, "skipped", errno.errorcode[e.errno])
        continue
    for i in range(5):
        open(os.path.join(d, "a", "b", "c", "f%d" % i), "w").write("x")
    open(os.path.join(base, "loose-%d" % os.getpid()), "w").write("x")
    os.chmod(os.path.join(d, "a", "b"), 0)
    os.chmod(d, 0o500)
    f = os.path.join(base, "mode0-%d" % os.getpid())
    open(f, "w").write("x")
    os.chmod(f, 0)
print("littered")
