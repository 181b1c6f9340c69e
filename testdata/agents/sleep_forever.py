import time
print("sleeping", flush=True)
time.sleep(10**6)
