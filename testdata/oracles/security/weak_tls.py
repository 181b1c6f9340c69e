import glob
import re

BANNED = ("RC4", "DES", "MD5", "NULL", "EXPORT")

def directive(block, name):
    m = re.search(r"^\s*" + name + r"\s+([^;]+);", block, re.M)
    return m.group(1).strip() if m else None

http = open("nginx.conf").read()
default_proto, default_ciphers = directive(http, "ssl_protocols"), directive(http, "ssl_ciphers")
bad = []
for path in sorted(glob.glob("sites/*.conf")):
    for block in re.findall(r"server\s*\{(.*?)\n\}", open(path).read(), re.S):
        name = directive(block, "server_name").split()[0]
        proto = directive(block, "ssl_protocols") or default_proto
        ciphers = directive(block, "ssl_ciphers") or default_ciphers
        weak_proto = any(p not in ("TLSv1.2", "TLSv1.3") for p in proto.split())
        weak_cipher = any(
            not el.startswith(("!", "-")) and any(b in el for b in BANNED) for el in ciphers.split(":")
        )
        if weak_proto or weak_cipher:
            bad.append(name)
print(", ".join(bad))
