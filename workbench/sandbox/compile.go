package sandbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// compileScript compiles its standard input as the bootstrap's exec of a
// source would (the file name "<string>", no inherited flags) and writes
// the code object, marshalled, to its standard output.
const compileScript = "import sys, marshal; sys.stdout.buffer.write(marshal.dumps(" +
	"compile(sys.stdin.buffer.read(), '<string>', 'exec', dont_inherit=True)))"

// overflowID is the kernel's overflow uid and gid ("nobody"): no episode's
// (SpaceLimit), no file's owner.
const overflowID = 65534

// compileTimeout bounds the compile.
const compileTimeout = 30 * time.Second

// compiledCode is one program compiled by one interpreter, once.
type compiledCode struct {
	once sync.Once
	code []byte // nil: the compile failed
}

// compiled returns source compiled by python (the code object,
// marshalled: marshal.loads gives it back in that interpreter), or nil
// when it cannot be. The fork server's program takes about 4 ms of CPU
// time to compile, in every template; this compiles it once per sandbox
// and interpreter, the first time it is asked for, outside any episode,
// as the overflow user when this process is root (the interpreter was
// only ever run as episode uids; it needs no privilege to compile), in
// /, with no environment (python -I -S reads no environment, no user or
// site directory and nothing of the working directory, only the source
// it is given). Templates run what the interpreter makes of the program
// either way. A template whose interpreter changed since cannot load it
// and ends; the fork server then falls back as for any template that
// cannot start.
func (s *Sandbox) compiled(python, source string) []byte {
	key := python + "\x00" + string(func() []byte { h := sha256.Sum256([]byte(source)); return h[:] }())
	s.compileMu.Lock()
	if s.compiledCode == nil {
		s.compiledCode = map[string]*compiledCode{}
	}
	c := s.compiledCode[key]
	if c == nil {
		c = &compiledCode{}
		s.compiledCode[key] = c
	}
	s.compileMu.Unlock()
	c.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), compileTimeout)
		defer cancel()
		argv := []string{python, "-I", "-S", "-c", compileScript}
		if s.testCompileArgv != nil {
			argv = s.testCompileArgv(python)
		}
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env = []string{}
		cmd.Dir = "/"
		if os.Geteuid() == 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: overflowID, Gid: overflowID}}
		}
		cmd.Stdin = bytes.NewReader([]byte(source))
		var out bytes.Buffer
		cmd.Stdout = &out
		if cmd.Run() == nil && out.Len() > 0 {
			c.code = out.Bytes()
		}
	})
	return c.code
}
