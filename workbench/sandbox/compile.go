package sandbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os/exec"
	"sync"
	"time"
)

// compileScript compiles its standard input as the bootstrap's exec of a
// source would (the file name "<string>", no inherited flags) and writes
// the code object, marshalled, to its standard output.
const compileScript = "import sys, marshal; sys.stdout.buffer.write(marshal.dumps(" +
	"compile(sys.stdin.buffer.read(), '<string>', 'exec', dont_inherit=True)))"

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
// and interpreter, the first time it is asked for, as this process (root,
// outside any episode: python -I -S reads no environment, no user or
// site directory and nothing of the working directory, only the source
// it is given). A template whose interpreter changed since cannot load
// it and ends; the fork server then falls back as for any template that
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
		cmd := exec.CommandContext(ctx, python, "-I", "-S", "-c", compileScript)
		cmd.Env = []string{}
		cmd.Stdin = bytes.NewReader([]byte(source))
		var out bytes.Buffer
		cmd.Stdout = &out
		if cmd.Run() == nil && out.Len() > 0 {
			c.code = out.Bytes()
		}
	})
	return c.code
}
