# A connection flood against the episode server and the grader: as many
# processes as the uid may have each open as many connections as they can
# (to every target in turn), send half a request, and hold them, so a
# server that keeps a connection it will refuse runs out of file
# descriptors (and a third episode's run_python with it). At the end it
# counts the connections the servers kept open: one still silent after
# the hold (no reply, no close) is one the server holds a descriptor for.
import os, socket, time

TARGETS = [t for t in "{{TARGETS}}".split(",") if t]
HOLD = 4.0


def flood():
    held, failed = [], 0
    for i in range(100):
        host, port = TARGETS[i % len(TARGETS)].rsplit(":", 1)
        try:
            s = socket.create_connection((host, int(port)), timeout=2)
        except OSError as e:
            if e.errno == 24:  # EMFILE: this process's own limit
                break
            failed += 1
            continue
        try:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")  # never finished
        except OSError:
            pass
        held.append(s)
    time.sleep(HOLD)
    kept = 0
    for s in held:
        s.setblocking(False)
        try:
            s.recv(1)  # a reply or a close: the server let it go
        except BlockingIOError:
            kept += 1
        except OSError:
            pass
    return len(held), kept, failed


children = []
for _ in range(30):
    r, w = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        break
    if pid == 0:
        os.close(r)
        try:
            os.write(w, ("%d %d %d\n" % flood()).encode())
        finally:
            os._exit(0)
    os.close(w)
    children.append((pid, r))
opened = kept = failed = 0
for pid, r in children:
    data = b""
    while True:
        chunk = os.read(r, 64)
        if not chunk:
            break
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    if data:
        o, k, f = map(int, data.split())
        opened, kept, failed = opened + o, kept + k, failed + f
print("flood: %d processes, %d connections opened, %d kept open by the servers, %d failed" % (len(children), opened, kept, failed))
