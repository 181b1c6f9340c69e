# Busy processes that never end.
import os
for _ in range(4):
    if os.fork() == 0:
        break
while True:
    pass
