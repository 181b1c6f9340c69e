# A covert channel through AF_VSOCK, whose port table is one for the
# whole machine whatever the network namespace: the sender binds one port
# per set bit of a message and holds them; the receiver, another episode
# (of another workspace, in the outside review), finds which ports are
# taken by trying to bind them itself. {{ROLE}} is "send" or "receive".
import errno, hashlib, os, socket, time

MESSAGE = b"answer"
AF_VSOCK, CID_ANY = 40, 0xFFFFFFFF
BASE = 0x7A000000 + int(hashlib.sha256(b"{{RUN_ID}}").hexdigest()[:6], 16) * 64
bits = [(MESSAGE[i // 8] >> (7 - i % 8)) & 1 for i in range(8 * len(MESSAGE))]


def sock():
    return socket.socket(AF_VSOCK, socket.SOCK_STREAM)


try:
    sock().close()
except OSError as e:
    print("vsock denied", errno.errorcode[e.errno])
    raise SystemExit(0)

if "{{ROLE}}" == "send":
    held = []
    for i, b in enumerate([1] + bits):  # BASE itself: "a message is up"
        if b:
            s = sock()
            s.bind((CID_ANY, BASE + i))
            held.append(s)
    print("SENT", len(held), flush=True)
    time.sleep(5)
else:
    def taken(port):
        s = sock()
        try:
            s.bind((CID_ANY, port))
            return False
        except OSError as e:
            return e.errno == errno.EADDRINUSE
        finally:
            s.close()
    deadline = time.time() + 5
    while not taken(BASE) and time.time() < deadline:
        time.sleep(0.05)
    got = [int(taken(BASE + 1 + i)) for i in range(len(bits))]
    data = bytes(int("".join(map(str, got[i:i + 8])), 2) for i in range(0, len(got), 8))
    print("RECEIVED", data)
