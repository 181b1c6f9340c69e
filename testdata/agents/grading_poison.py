# solution.py, and run with run_python too: on every start it looks for
# any mark an earlier run or graded case could have left in an interpreter
# a fork server hands on (sys.modules, builtins, a preloaded module, the
# environment, a thread, a child, the directory) and answers wrongly when
# it finds one; then it leaves all those marks.
import builtins, json, os, sys, threading, time, types
_found = ("agentpen_mark" in sys.modules or hasattr(builtins, "agentpen_mark")
          or getattr(json, "agentpen_mark", False) or "AGENTPEN_MARK" in os.environ
          or threading.active_count() != 1 or os.getcwd() != "{{WORKSPACE}}")
try:
    os.waitpid(-1, os.WNOHANG)
    _found = True
except ChildProcessError:
    pass
sys.modules["agentpen_mark"] = types.ModuleType("agentpen_mark")
builtins.agentpen_mark = json.agentpen_mark = True
os.environ["AGENTPEN_MARK"] = "1"
threading.Thread(target=time.sleep, args=(1000,), daemon=True).start()
if os.fork() == 0:
    time.sleep(1000)

def median(values):
    if _found:
        return -12345
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2

if __name__ == "__main__":
    print("clean" if not _found else "FOUND A MARK", median([3, 1, 2]))
