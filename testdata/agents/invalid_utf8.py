# Invalid UTF-8 on both streams and in file names.
import os, sys
sys.stdout.buffer.write(b"bad \xff\xfe \xc3\x28 \xed\xa0\x80 end\n")
sys.stderr.buffer.write(b"err \x80\x81\n")
for name in (b"bad\xffname.txt", b"\xed\xa0\x80.txt", b"ok.txt"):
    fd = os.open(name, os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"\xff\xfe\n")
    os.close(fd)
