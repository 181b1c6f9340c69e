# Try to read, list and write another live episode's workspace.
import os
other = "{{OTHER_WS}}"
denied = 0
for attempt in (lambda: os.listdir(other),
                lambda: open(os.path.join(other, "sales.csv")).read(),
                lambda: open(os.path.join(other, "planted.txt"), "w").write("x")):
    try:
        attempt()
        print("ALLOWED")
    except PermissionError:
        denied += 1
print("denied", denied)
