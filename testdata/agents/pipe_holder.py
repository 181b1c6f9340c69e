# A child that keeps the output pipe open after the script ends.
import os, time
if os.fork() == 0:
    time.sleep(10**6)
print("parent done", flush=True)
