# Run twice in one episode (run_python), {{ROLE}} plant then look: the
# first run changes everything of its interpreter a fork server's next run
# could inherit (modules, builtins, a preloaded module, the environment,
# the working directory, sys settings, signals, open descriptors) and
# leaves a thread and a child behind; the second reports what it finds.
import builtins, json, os, signal, sys, threading, time, types
if "{{ROLE}}" == "plant":
    sys.modules["planted_module"] = types.ModuleType("planted_module")
    builtins.planted_builtin = True
    json.dumps = lambda *a, **k: "forged"
    os.environ["PLANTED_ENV"] = "1"
    os.chdir("/tmp")
    sys.path.insert(0, "/tmp")
    sys.setrecursionlimit(77)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])
    os.dup2(os.open("/dev/null", os.O_RDONLY), 77)
    threading.Thread(target=time.sleep, args=(1000,)).start()
    if os.fork() == 0:
        os.setsid()
        time.sleep(1000)
    print("planted", flush=True)
    os._exit(0)  # the thread would keep it running
found = []
if "planted_module" in sys.modules: found.append("module")
if hasattr(builtins, "planted_builtin"): found.append("builtin")
if json.dumps([1]) != "[1]": found.append("json")
if "PLANTED_ENV" in os.environ: found.append("env")
if os.getcwd() != "{{WORKSPACE}}": found.append("cwd " + os.getcwd())
if "/tmp" in sys.path: found.append("path")
if sys.getrecursionlimit() == 77: found.append("recursionlimit")
if signal.getsignal(signal.SIGTERM) != signal.SIG_DFL: found.append("signal")
if signal.pthread_sigmask(signal.SIG_BLOCK, []): found.append("sigmask")
if os.path.exists("/proc/self/fd/77"): found.append("fd")
if threading.active_count() != 1: found.append("thread")
try:
    os.waitpid(-1, os.WNOHANG)
    found.append("child")
except ChildProcessError:
    pass
print("found", found)
