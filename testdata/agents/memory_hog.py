# Ask for 4 GiB.
try:
    b = bytearray(4 << 30)
    print("ALLOCATED", len(b))
except MemoryError:
    print("MemoryError")
