# Fill every place the episode may write (its workspace, /tmp, /dev/shm)
# with files of the largest size a run may write, until the disk says no:
# one episode filled a workspace container's shared tmpfs this way, and
# every later reset there failed.
import errno, os
total = 0
for d in (".", "/tmp", "/dev/shm"):
    for i in range(1000):
        try:
            with open(os.path.join(d, "fill-%d" % i), "wb") as f:
                f.write(b"x" * (16 << 20))
            total += 1
        except OSError as e:
            print(d, "stopped", errno.errorcode[e.errno])
            break
print("filled", total)
