# solution.py: correct, but writes into the workspace on every call.
import os

def median(values):
    with open("state.txt", "a") as fh:
        fh.write("call\n")
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
