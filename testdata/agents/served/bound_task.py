# Agent code in a bound workspace that wants another task: it reads the
# bind file to learn its own task, and asks the workspace's episode
# server, on its unix socket and on its TCP port, for a reset of another
# task (over HTTP /reset and over the WebSocket /ws). Each attempt prints
# what stopped it; "BIND READ", "LISTED" or "SERVED" means it got through.
import base64, json, os, socket

SOCKET = "{{SOCKET}}"
BIND = "{{BIND_FILE}}"
OTHER = "{{OTHER_TASK}}"
TCP = "{{TCP}}"

try:
    print("BIND READ", open(BIND).read().strip())
except OSError as e:
    print("bind file: denied", e.errno)
try:
    print("LISTED", os.listdir(os.path.dirname(BIND)))
except OSError as e:
    print("run dir: denied", e.errno)

def connect(kind):
    if kind == "unix":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(5)
        s.connect(SOCKET)
    else:
        host, port = TCP.rsplit(":", 1)
        s = socket.create_connection((host, int(port)), timeout=5)
    return s

def http_reset(s):
    body = json.dumps({"task_id": OTHER}).encode()
    s.sendall(b"POST /reset HTTP/1.1\r\nHost: wb\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    return s.recv(65536)

def ws_reset(s):
    key = base64.b64encode(os.urandom(16))
    s.sendall(b"GET /ws HTTP/1.1\r\nHost: wb\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: " + key + b"\r\n\r\n")
    head = s.recv(65536)
    if not head.startswith(b"HTTP/1.1 101"):
        return head
    payload = json.dumps({"type": "reset", "data": {"task_id": OTHER}}).encode()
    mask = os.urandom(4)
    frame = bytes([0x81, 0x80 | 126]) + len(payload).to_bytes(2, "big") + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    s.sendall(frame)
    return s.recv(65536)

for kind in ("unix", "tcp"):
    for name, attempt in (("http", http_reset), ("ws", ws_reset)):
        try:
            s = connect(kind)
        except OSError as e:
            print("%s %s: connect denied" % (kind, name), e.errno)
            continue
        try:
            reply = attempt(s)
        except OSError as e:
            print("%s %s: closed" % (kind, name), e.errno)
            continue
        finally:
            s.close()
        if not reply:
            print("%s %s: closed without a reply" % (kind, name))
        elif OTHER.encode() in reply and b'"observation"' in reply:
            print("%s %s: SERVED" % (kind, name), reply[:200])
        else:
            print("%s %s: answered" % (kind, name), reply[:300])
