# Prints without end, on both streams, from itself and from a child in a
# session of its own that does not wait for it: only the output limit (or
# the deadline) ends them, and both must go.
import os
import sys

line = "z" * 4095 + "\n"
if os.fork() == 0:
    os.setsid()
while True:
    sys.stdout.write(line)
    sys.stderr.write(line)
