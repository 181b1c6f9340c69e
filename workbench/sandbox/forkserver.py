# The episode's fork server (forkserver.go starts it; read its comments
# first). One interpreter, started by the launcher like a run (the
# episode's namespaces and uid, the runs' rlimits, the server's filter, and
# a user namespace of its own where it holds CAP_SYS_ADMIN), that never
# runs agent code: it imports what runs need and then only forks. Roles:
#   template  the process the launcher starts: it forks only servers (a
#             "serve" message carries the new server's socket)
#   server    a copy of the template: it forks one child per "run" message
#   child     per run: it makes the run's PID and IPC namespaces, drops
#             every capability, installs the episode's filter over the
#             server's, forks the namespace's init and the program, waits
#             for the program or the cancel pipe, kills the init (the
#             kernel kills everything else of the namespace with it), and
#             reports on the run's report pipe as the launcher does
#   program   the run's own process: set up as the launcher's program is,
#             then as a fresh `python3 <flags> <script>` would be, it runs
#             the script at the top level of this module (so its caller is
#             one frame, this module's)
# Every role but the program returns from _template only by exiting; the
# program returns from it, with its request, to the code at the bottom.
# Go fills the @@NAME@@ numbers in, and runs this after a bootstrap
# (forkServerBootstrap) that took '' (-c: the working directory) off
# sys.path and set _pristine, and lines that set _filter and _preload.
# Nothing here imports from the working directory or any place agent code
# can write.
_before = frozenset(sys.modules)
for _name in _preload:
    try:
        __import__(_name)
    except ImportError:
        pass
_preloaded = frozenset(sys.modules) - _before
import os, gc, _signal, select, ctypes, atexit


def _warm():
    # Once, what every run's program does first (compile and run code, make
    # streams, a module and a loader, set and unset a variable, list a
    # directory), so that it finds the interpreter's caches filled: a
    # run's first compile costs 1 ms in a copy of an interpreter that
    # never compiled, 0.2 ms in one that did. Nothing of it stays.
    g = {"__builtins__": sys.modules["builtins"]}
    exec(compile(b"def f(x):\n    return [str(i) + 'a' for i in x]\nf(range(3))\n", "/w.py", "exec", dont_inherit=True), g)
    io = sys.modules["io"]
    io.TextIOWrapper(io.open(1, "wb", -1, None, None, None, False), sys.stdout.encoding, sys.stdout.errors, "\n", False, False)
    type(sys)("__main__").__dict__.update(__loader__=sys.modules["_frozen_importlib_external"].SourceFileLoader("__main__", "/w.py"))
    os.environb[b"AGENTPEN_WARM"] = b"1"
    del os.environb[b"AGENTPEN_WARM"]
    os.listdir("/")
    os.fsdecode(b"/w.py").partition(".")


_warm()
_mine = frozenset(sys.modules) - _pristine - _preloaded
_preloaded_tops = frozenset(n.partition(".")[0] for n in _preloaded)
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _sys(nr, *args):
    if _libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args]) == -1:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def _prctl(option, arg):
    _sys(@@SYS_PRCTL@@, option, arg, 0, 0, 0)


class _FProg(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_filter_buf = ctypes.create_string_buffer(_filter, len(_filter))
_fprog = _FProg(len(_filter) // 8, ctypes.addressof(_filter_buf))
_cap_header = (ctypes.c_uint32 * 2)(@@CAP_VERSION@@, 0)
_cap_none = (ctypes.c_uint32 * 6)()
_rlimit = (ctypes.c_uint64 * 2)()
# struct ifreq for SIOCSIFFLAGS: "lo", IFF_UP (a graded case's network
# namespace's loopback interface).
_lo_up = ctypes.create_string_buffer(b"lo".ljust(16, b"\0") + (@@IFF_UP@@).to_bytes(2, "little"), 40)
_prctl(@@PR_SET_DUMPABLE@@, 0)
_S_IFMT = sys.modules["stat"].S_IFMT
_stdio_kinds = [_S_IFMT(os.fstat(fd).st_mode) for fd in (0, 1, 2)]
os.chdir("/")
_ctl = _socket.socket(fileno=0)
gc.freeze()


def _recv():
    """One message and its descriptors; (None, []) once the peer is gone."""
    data, anc, _, _ = _ctl.recvmsg(1 << 16, _socket.CMSG_SPACE(16 * 4))
    fds = []
    for level, kind, raw in anc:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            fds.extend(memoryview(raw)[: len(raw) - len(raw) % 4].cast("i"))
    if not data:
        for fd in fds:
            os.close(fd)
        return None, []
    return data, fds


def _reap():
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def _template():
    _ctl.send(b"ready")
    me = os.getpid()
    while True:
        msg, fds = _recv()
        if msg is None:
            os._exit(0)
        _reap()
        if msg not in (b"serve", b"serve-net") or len(fds) != 1:
            os._exit(70)
        if os.fork() == 0:
            _prctl(@@PR_SET_PDEATHSIG@@, @@SIGKILL@@)
            if os.getppid() != me:
                os._exit(1)
            os.dup2(fds[0], 0)
            os.close(fds[0])
            return _server(msg == b"serve-net")
        os.close(fds[0])


def _server(net):
    # One run at a time (each in a network namespace of its own with net).
    # The first run's child is made at once; each next one as soon as the
    # run before took its request (the child says so on a pipe), so that it
    # is ready when the next request comes, however soon. A child that ends
    # without taking one is replaced; one that says the socket ended (3)
    # ends the server.
    me = os.getpid()
    took_r, took_w = os.pipe()
    children, make = {}, True
    while True:
        if make:
            pid = os.fork()
            if pid == 0:
                os.close(took_r)
                for fd in children:
                    os.close(fd)
                return _child(me, took_w, net)
            children[os.pidfd_open(pid)] = pid
            make = False
        ready = select.select([took_r, *children], [], [])[0]
        if took_r in ready:
            os.read(took_r, 1)
            make = True
        for fd in ready:
            if fd in children:
                code = os.waitstatus_to_exitcode(os.waitpid(children.pop(fd), 0)[1])
                os.close(fd)
                if code == 3:
                    os._exit(0)
                if code != 0 and not children:
                    make = True  # it ended before it took a request


def _report(fd, tag, index, value):
    os.write(fd, bytes((ord(tag), @@TABLE_FORK@@, index, 0)) + (value & 0xFFFFFFFF).to_bytes(4, "little"))


def _request():
    """The next run's request: its message and five descriptors; (None,
    None) once the socket ended."""
    msg, fds = _recv()
    if msg is None:
        return None, None
    if not msg.startswith(b"run\0") or len(fds) != 5:
        os._exit(70)
    return msg, fds


def _fail(step, e, fds):
    # Fails the run of fds, or the next request (taken for that) when
    # there is none yet; then exits.
    if fds is None:
        fds = _request()[1]
    if fds is not None:
        _report(fds[3], "F", step, getattr(e, "errno", None) or 0)
    os._exit(127)


# A failure report's index is the step (forkSteps in forkserver.go words
# them): 0..7 and 11 the child's, 8..10 the program's.


def _child(server, took, net):
    # A run's child, made before the request: it makes the run's PID and
    # IPC namespaces (and with net a network namespace, its loopback
    # interface up), drops its capabilities, installs the episode's
    # filter, and forks the namespace's init and the program; the program
    # takes the request and hands the child the run's report and cancel
    # pipes. The init ends once the program did (the kernel then kills
    # every process of the namespace); the child waits for that or the
    # cancel pipe (then it kills the init), reaps both and reports.
    step, init, prog, fds = 0, 0, 0, None
    try:
        _prctl(@@PR_SET_PDEATHSIG@@, @@SIGKILL@@)
        if os.getppid() != server:
            os._exit(1)
        step = 2
        _sys(@@SYS_UNSHARE@@, @@CLONE_NEWPID@@ | @@CLONE_NEWIPC@@ | (@@CLONE_NEWNET@@ if net else 0))
        if net:
            step = 11
            s = _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM)
            try:
                if _libc.ioctl(s.fileno(), ctypes.c_ulong(@@SIOCSIFFLAGS@@), _lo_up) == -1:
                    e = ctypes.get_errno()
                    raise OSError(e, os.strerror(e))
            finally:
                s.close()
        step = 3
        _sys(@@SYS_CAPSET@@, _cap_header, _cap_none)
        step = 4
        _sys(@@SYS_SECCOMP@@, @@SECCOMP_SET_MODE_FILTER@@, 0, ctypes.byref(_fprog))
        step = 5
        go_r, go_w = os.pipe()
        init = os.fork()
        if init == 0:
            _init(go_r)
        os.close(go_r)
        step = 6
        ours, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
        prog = os.fork()
        if prog == 0:
            ours.detach()
            os.close(go_w)
            return _program(theirs)
        os.write(go_w, b"g")
        os.close(go_w)
    except BaseException as e:
        for pid in (init, prog):
            if pid:
                os.kill(pid, @@SIGKILL@@)
                os.waitpid(pid, 0)
        _fail(step, e, fds)
    try:
        theirs.close()
        _ctl.detach()
        os.close(0)
        _, anc, _, _ = ours.recvmsg(1, _socket.CMSG_SPACE(2 * 4))
        got = [fd for level, kind, raw in anc for fd in memoryview(raw)[: len(raw) - len(raw) % 4].cast("i")]
        if len(got) != 2:
            # The program ended before a request (3: the socket ended).
            status = os.waitpid(prog, 0)[1]
            os.kill(init, @@SIGKILL@@)
            os.waitpid(init, 0)
            os._exit(3 if os.waitstatus_to_exitcode(status) == 3 else 4)
        os.write(took, b"t")
        os.close(took)
        report, cancel = got
        # The program ends (reaped at once: the init's end waits until
        # every pid of the namespace is free), then the init; or the
        # cancel pipe ends the init first.
        init_fd, prog_fd, status = os.pidfd_open(init), os.pidfd_open(prog), None
        waiting = [init_fd, prog_fd, cancel]
        while init_fd in waiting:
            ready = select.select(waiting, [], [])[0]
            if cancel in ready:
                os.kill(init, @@SIGKILL@@)
                waiting.remove(cancel)
            if prog_fd in ready:
                status = os.waitpid(prog, 0)[1]
                waiting.remove(prog_fd)
            if init_fd in ready:
                waiting.remove(init_fd)
        if status is None:
            status = os.waitpid(prog, 0)[1]
        os.waitpid(init, 0)
        _report(report, "X", 0, status)
        os.close(report)  # the run is over: before this process's own end
        os._exit(0)
    except BaseException:
        os.kill(init, @@SIGKILL@@)
        os.waitpid(init, 0)
        os._exit(127)


def _init(go):
    # pid 1 of the run's namespace: no handler for any signal (so nothing
    # in the namespace can stop or kill it), orphans reaped by the kernel,
    # every descriptor closed; it dies with the child (its parent-death
    # signal, or the end of the pipe on which the child says the program,
    # pid 2, is there), and ends once the program ended.
    try:
        _prctl(@@PR_SET_PDEATHSIG@@, @@SIGKILL@@)
        for s in range(1, _signal.NSIG):
            if s not in (@@SIGKILL@@, @@SIGSTOP@@, @@SIGCHLD@@):
                try:
                    _signal.signal(s, _signal.SIG_DFL)
                except (OSError, ValueError):
                    pass
        _signal.signal(@@SIGCHLD@@, _signal.SIG_IGN)
        if go:  # closerange(0, 0) would close them all
            os.closerange(0, go)
        os.closerange(go + 1, 1 << 20)
        if os.read(go, 1):
            os.close(go)
            select.select([os.pidfd_open(2)], [], [])
    finally:
        os._exit(0)


def _program(to_child):
    # The run's program, made before its request: it dies with the child
    # (its parent, outside the namespace: getppid() is 0 while it lives),
    # takes the request, says the run started, hands the child the report
    # and cancel pipes, and returns the rest to the code at the bottom.
    _prctl(@@PR_SET_PDEATHSIG@@, @@SIGKILL@@)
    if os.getppid() != 0:
        os._exit(1)
    # What it will do once the request comes, done once now: the pages
    # that touches are this process's own before the request (copying
    # them on first write cost a run about a millisecond).
    _warm()
    _sys(@@SYS_PRLIMIT64@@, 0, 7, None, _rlimit)
    b"run\0a\0b".split(b"\0")
    for name in _mine:
        name in sys.modules
    msg, fds = _request()
    if msg is None:
        os._exit(3)
    step = 7
    try:
        _report(fds[3], "S", 0, 0)
        to_child.sendmsg([b"r"], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, bytes((ctypes.c_int * 2)(fds[3], fds[4])))])
        to_child.close()
        os.close(fds[4])
        _ctl.detach()
    except BaseException as e:
        _fail(step, e, fds)
    return (msg, *fds[:4])


def _setup(msg, stdin, stdout, stderr, report):
    # The program as the launcher's is (descriptors, session, directory,
    # limits, umask, dumpable as after an exec); a failure is reported and
    # ends it.
    step = 10
    try:
        fields = msg.split(b"\0")
        python, flags, script, cwd, limits = (os.fsdecode(f) for f in fields[1:6])
        env = fields[6:]
        os.dup2(stdin, 0)
        os.dup2(stdout, 1)
        os.dup2(stderr, 2)
        os.setsid()
        step = 8
        os.chdir(cwd)
        step = 9
        for pair in limits.split(",") if limits else ():
            res, _, value = pair.partition("=")
            _rlimit[0] = _rlimit[1] = int(value)
            _sys(@@SYS_PRLIMIT64@@, 0, int(res), _rlimit, None)
        step = 10
        os.umask(0o77)
        _prctl(@@PR_SET_DUMPABLE@@, 1)
        os.closerange(3, 1 << 20)
        argv = [python] + flags.split() + [script]
        return argv, os.path.join(cwd, script), env
    except BaseException as e:
        _report(report, "F", step, getattr(e, "errno", None) or 0)
        os._exit(127)


def _exec(argv, env):
    os.execve(argv[0], argv, dict(e.partition(b"=")[::2] for e in env))


def _source(argv, path, env):
    # The script, or the interpreter itself for what it reads or words
    # differently (an unreadable file, NUL bytes, bytecode).
    try:
        with open(path, "rb") as f:
            source = f.read()
    except OSError:
        _exec(argv, env)
    if b"\0" in source or source[:4] == sys.modules["_frozen_importlib_external"].MAGIC_NUMBER:
        _exec(argv, env)
    return source


def _fresh(argv, path, env):
    # The interpreter's state as `python3 <flags> <script>` starts it:
    # sys.modules (with the preloaded modules, unless the script's
    # directory shadows one of them), argv, path, flags that can change,
    # the environment, the standard streams, and a new __main__.
    for name in _mine:
        sys.modules.pop(name, None)
    try:
        names = os.listdir(os.path.dirname(path))
    except OSError:
        names = ()
    if any(n.partition(".")[0] in _preloaded_tops for n in names):
        for name in _preloaded:
            sys.modules.pop(name, None)
    sys.argv = argv[-1:]
    sys.orig_argv = argv
    sys.path.insert(0, os.path.dirname(path))
    if "-B" in argv and not sys.flags.dont_write_bytecode:
        # As -B sets them: the flag importlib reads, and sys.flags (which
        # subprocess passes on to interpreters it starts), item 4.
        sys.dont_write_bytecode = True
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(1))
        ctypes.pythonapi.PyStructSequence_SetItem.argtypes = (ctypes.py_object, ctypes.c_ssize_t, ctypes.py_object)
        ctypes.pythonapi.PyStructSequence_SetItem(sys.flags, 4, 1)
    environ = dict(e.partition(b"=")[::2] for e in env)
    if dict(os.environb) != environ:  # the server starts with the runs'
        os.environ.clear()
        os.environb.update(environ)
    io = sys.modules["io"]
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        if fd and _S_IFMT(os.fstat(fd).st_mode) == _stdio_kinds[fd]:
            continue  # a stream made for a descriptor of this kind, unused
        old = getattr(sys, name)
        mode = "r" if fd == 0 else "w"
        buf = io.open(fd, mode + "b", -1, None, None, None, False)
        buf.raw.name = "<%s>" % name
        tty = buf.raw.isatty()
        stream = io.TextIOWrapper(buf, old.encoding, old.errors, "\n", tty or fd == 2, False)
        stream.mode = mode
        setattr(sys, name, stream)
        setattr(sys, "__%s__" % name, stream)
    main = type(sys)("__main__")
    main.__dict__.update(__annotations__={}, __builtins__=sys.modules["builtins"], __file__=path, __cached__=None,
                         __loader__=sys.modules["_frozen_importlib_external"].SourceFileLoader("__main__", path))
    sys.modules["__main__"] = main
    return main


def _system_exit(e):
    # As the interpreter ends on an uncaught SystemExit.
    code = e.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    try:
        sys.stderr.write(str(code) + "\n")
    except BaseException:
        pass
    return 1


def _uncaught(e, tb):
    # As the interpreter prints an uncaught exception (tb without this
    # module's frame); a KeyboardInterrupt ends the process by SIGINT.
    e.__traceback__ = tb
    sys.last_type, sys.last_value, sys.last_traceback = type(e), e, tb
    try:
        sys.excepthook(type(e), e, tb)
    except BaseException:
        pass
    return -@@SIGINT@@ if isinstance(e, KeyboardInterrupt) else 1


def _finish(status):
    # What the interpreter does at exit that a run can see: wait for its
    # threads, run the atexit functions, finalize what __main__ holds
    # (files it left open are flushed), flush the standard streams. The
    # rest of the interpreter is the server's, let go unfinalized.
    try:
        threading = sys.modules.get("threading")
        if threading is not None:
            threading._shutdown()
    except BaseException:
        pass
    atexit._run_exitfuncs()
    try:
        sys.modules["__main__"].__dict__.clear()
        gc.collect()
    except BaseException:
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            status = 120
    _libc.fflush(None)
    if status == -@@SIGINT@@:
        _signal.signal(@@SIGINT@@, _signal.SIG_DFL)
        os.kill(os.getpid(), @@SIGINT@@)
        status = 128 + @@SIGINT@@
    os._exit(status & 0xFF)


try:
    _argv, _path, _env = _setup(*_template())
    _code = _source(_argv, _path, _env)
    try:
        _main = _fresh(_argv, _path, _env)
    except BaseException:
        _exec(_argv, _env)
    try:
        _code = compile(_code, _path, "exec", dont_inherit=True)
    except BaseException as _e:
        _status = _uncaught(_e, None)
    else:
        try:
            exec(_code, _main.__dict__)
            _status = 0
        except SystemExit as _e:
            _status = _system_exit(_e)
        except BaseException as _e:
            _status = _uncaught(_e, _e.__traceback__.tb_next)
    _finish(_status)
finally:
    os._exit(70)  # _finish ends the program; only a bug of this module gets here
