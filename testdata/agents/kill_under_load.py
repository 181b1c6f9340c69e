# Many processes that take long to die: the parent maps tens of thousands
# of small private regions (each its own mapping, so none merge), then
# forks children that inherit them all and sleep. Once the run ends and
# they are sent SIGKILL, each child must tear down every mapping before it
# is gone, so for a while the uid has dozens of processes that are merely
# exiting. The kill must wait for them, however many rounds that takes,
# and not give up.
import mmap, os, time

keep = []
for i in range(35000):
    prot = mmap.PROT_READ if i % 2 else mmap.PROT_READ | mmap.PROT_WRITE
    keep.append(mmap.mmap(-1, 4096, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, prot=prot))
children = 0
for _ in range(55):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(1000)
        os._exit(0)
    children += 1
print("children", children)
