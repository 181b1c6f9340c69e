# A setsid child whose main thread exits alone (SYS_exit, not exit_group):
# /proc/<pid>/status then shows the group leader as a zombie while another
# thread of the process keeps running as the uid.
import ctypes, os, platform, threading, time
SYS_EXIT = {"x86_64": 60, "aarch64": 93}[platform.machine()]
if os.fork() == 0:
    os.setsid()
    for fd in (0, 1, 2):
        os.close(fd)

    def keep_running():
        while True:
            with open("/tmp/daemon-alive", "a") as fh:
                fh.write("x")
            time.sleep(0.05)

    threading.Thread(target=keep_running).start()
    time.sleep(0.2)
    ctypes.CDLL(None).syscall(SYS_EXIT, 0)
time.sleep(0.5)  # the child's main thread has exited by now
print("zombie leader started")
