# A POSIX message queue outlives the processes that made it, and mq_open
# works whether or not /dev/mqueue is mounted. The first episode leaves a
# queue, readable by every uid, with a message in it; a later, unrelated
# episode (another uid) opens it by name and reads the message.
import ctypes, errno, os

NAME = b"/wb-hostile-mq-{{RUN_ID}}"
libc = ctypes.CDLL("libc.so.6", use_errno=True)


class Attr(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_long), ("maxmsg", ctypes.c_long), ("msgsize", ctypes.c_long),
                ("curmsgs", ctypes.c_long), ("pad", ctypes.c_long * 4)]


libc.mq_open.restype = ctypes.c_int
libc.mq_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.POINTER(Attr)]
libc.mq_send.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint]
libc.mq_receive.restype = ctypes.c_ssize_t
libc.mq_receive.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p]
O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_NONBLOCK = 0, 1, 0o100, 0o200, 0o4000

fd = libc.mq_open(NAME, O_RDONLY | O_NONBLOCK, 0, None)
if fd >= 0:
    buf = ctypes.create_string_buffer(256)
    n = libc.mq_receive(fd, buf, 256, None)
    print("LEAKED", buf.raw[:n].decode() if n >= 0 else "(an empty queue)")
else:
    e = ctypes.get_errno()
    print("no queue left" if e == errno.ENOENT else "open errno %d" % e)
    fd = libc.mq_open(NAME, O_WRONLY | O_CREAT | O_EXCL, 0o644, ctypes.byref(Attr(0, 1, 64, 0)))
    if fd < 0:
        print("create refused errno %d" % ctypes.get_errno())
    else:
        os.fchmod(fd, 0o644)  # the launcher's umask 077 made it 0600
        msg = b"answer seen by uid %d" % os.getuid()
        libc.mq_send(fd, msg, len(msg), 0)
        print("queue planted")
