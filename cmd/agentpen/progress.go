package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/events"
	"github.com/agentpen/agentpen/store"
	"golang.org/x/sys/unix"
)

// progressView shows an operation's adapter.Progress on stderr, never on
// stdout: on a terminal one line rewritten in place ("up demo: created
// 12/30, ready 3/30 workspaces; server ready"), otherwise one line per
// step ("created 12/30 workspace agentpen-..."), and with --log-format
// json the campaign's events (package events: one JSON record per journal
// record, then the final state), the schema of the API's event stream. It is also the writer of the command's
// log, so on a terminal a log line never lands in the middle of the
// progress line.
type progressView struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	log   *slog.Logger // JSON mode: the steps are records of this log
	title string       // "up demo-1", "down demo-1"
	// What the terminal line shows.
	created, ready, removed map[string][2]int // by role: done, total
	note                    string
	shown                   bool // the terminal line is on screen
}

// newProgressView returns the view of one command's progress on w: tty
// says w is a terminal, asJSON that the log is JSON (then the steps are
// log records and nothing is rewritten).
func newProgressView(w io.Writer, tty, asJSON bool, title string) *progressView {
	return &progressView{w: w, tty: tty && !asJSON, title: title,
		created: map[string][2]int{}, ready: map[string][2]int{}, removed: map[string][2]int{}}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// Write writes one log line, clearing the terminal line first and
// drawing it again after.
func (v *progressView) Write(b []byte) (int, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.clear()
	n, err := v.w.Write(b)
	v.draw()
	return n, err
}

// step shows one step; it is the adapter's Progress callback. With a
// JSON log the steps are the journal's events instead (event).
func (v *progressView) step(p adapter.Progress) {
	if v.log != nil {
		return
	}
	if p.Step == adapter.StepAttesting {
		v.say("attesting")
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	switch p.Step {
	case adapter.StepCreated:
		v.created[p.Role] = [2]int{p.Done, p.Total}
	case adapter.StepReady:
		v.ready[p.Role] = [2]int{p.Done, p.Total}
	case adapter.StepRemoved:
		v.removed[p.Role] = [2]int{p.Done, p.Total}
	}
	if v.tty {
		v.clear()
		v.draw()
		return
	}
	// "workspace", "network"; a removal also names the kind, as a role
	// counts its containers and directories together.
	what := p.Role
	if p.Step == adapter.StepRemoved && string(p.Kind) != p.Role {
		kind := string(p.Kind)
		if p.Kind == campaign.KindDir {
			kind = "directory"
		}
		what += " " + kind
	}
	line := fmt.Sprintf("%s %d/%d %s %s", p.Step, p.Done, p.Total, what, p.Name)
	if p.Outcome != "" && p.Outcome != "removed" {
		line += " (" + p.Outcome + ")"
	}
	fmt.Fprintln(v.w, line)
}

// event writes one of the campaign's events (package events) as a line
// of the JSON log: the adapter's Journalled callback, through
// events.FromRecord, and the final state. Nothing is written without a
// JSON log.
func (v *progressView) event(ev events.Event) {
	if v.log == nil {
		return
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.w.Write(append(b, '\n'))
}

// journalled is the adapter's Journalled callback: each record's event.
func (v *progressView) journalled(id string, r campaign.Record) {
	if ev, ok := events.FromRecord(id, r); ok {
		v.event(ev)
	}
}

// final writes the campaign's final state event, read from its journal
// in root (nothing when it cannot be read: the command's error says
// why).
func (v *progressView) final(root *store.Root, id string) {
	if v.log == nil {
		return
	}
	c, err := root.Open(id)
	if err != nil {
		return
	}
	defer c.Close()
	st, err := c.Read()
	if err != nil {
		return
	}
	v.event(events.Final(id, st.Status, st.Lifecycle, time.Now()))
}

// say shows a phase the adapter does not count ("attesting").
func (v *progressView) say(note string) {
	if v.log != nil {
		v.log.Info(note)
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.tty {
		v.note = note
		v.clear()
		v.draw()
		return
	}
	fmt.Fprintln(v.w, note)
}

// finish ends the terminal line, so what follows starts on a line of its
// own.
func (v *progressView) finish() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.tty && v.shown {
		fmt.Fprintln(v.w)
	}
	v.shown = false
	v.tty = false
}

// line is what the terminal line says now.
func (v *progressView) line() string {
	var parts []string
	if c, ok := v.created[campaign.RoleWork]; ok {
		s := fmt.Sprintf("created %d/%d", c[0], c[1])
		if r, ok := v.ready[campaign.RoleWork]; ok {
			s += fmt.Sprintf(", ready %d/%d", r[0], r[1])
		}
		parts = append(parts, s+" workspaces")
	}
	switch {
	case v.ready[campaign.RoleServer][0] > 0:
		parts = append(parts, "server ready")
	case v.created[campaign.RoleServer][0] > 0:
		parts = append(parts, "server created")
	case v.created[campaign.RoleNetwork][1] > 0:
		n := v.created[campaign.RoleNetwork]
		parts = append(parts, fmt.Sprintf("networks %d/%d", n[0], n[1]))
	}
	if len(v.removed) > 0 {
		var rs []string
		for _, role := range []string{campaign.RoleServer, campaign.RoleWork, campaign.RoleNetwork} {
			if r, ok := v.removed[role]; ok {
				rs = append(rs, fmt.Sprintf("%s %d/%d", role, r[0], r[1]))
			}
		}
		parts = append(parts, "removed "+strings.Join(rs, ", "))
	}
	if v.note != "" {
		parts = append(parts, v.note)
	}
	return v.title + ": " + strings.Join(parts, "; ")
}

func (v *progressView) clear() {
	if v.tty && v.shown {
		fmt.Fprint(v.w, "\r\033[K")
		v.shown = false
	}
}

func (v *progressView) draw() {
	if v.tty && (len(v.created) > 0 || len(v.removed) > 0 || v.note != "") {
		fmt.Fprint(v.w, v.line())
		v.shown = true
	}
}
