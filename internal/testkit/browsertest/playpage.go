package browsertest

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentpen/agentpen/internal/testkit/oracle"
	"github.com/agentpen/agentpen/workbench/tasks"
)

// The workbench's play page (workbench/playpage), driven as a person
// would: fields filled, buttons clicked, the page's own display read.

// callTimeout bounds one reset or tool call through the page.
const callTimeout = time.Minute

// call clicks a button and waits until the page has answered one more
// call (body's data-calls).
func (b *Browser) call(clickExpr string) error {
	before := Eval[int](b, `Number(document.body.dataset.calls || 0)`)
	Eval[bool](b, clickExpr+`; true`)
	if !WaitFor(b, fmt.Sprintf(`Number(document.body.dataset.calls || 0) > %d`, before), callTimeout) {
		return fmt.Errorf("the page did not answer within %v", callTimeout)
	}
	return nil
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// PlayReset fills the reset form (taskID may be empty) and clicks Reset;
// it returns the task the page shows and the error it shows ("" when
// none).
func (b *Browser) PlayReset(taskID string) (task, errText string, err error) {
	Eval[bool](b, `document.getElementById("reset-task").value = `+jsString(taskID)+`; true`)
	if err := b.call(`document.getElementById("reset").click()`); err != nil {
		return "", "", err
	}
	return Eval[string](b, `document.getElementById("task").textContent`), Eval[string](b, `document.getElementById("error").textContent`), nil
}

// PlayStep fills the form of tool with args (the other fields emptied)
// and clicks its Call button; it returns what the page shows.
func (b *Browser) PlayStep(tool string, args map[string]any) (oracle.Result, error) {
	form := "tool-" + tool
	if !Eval[bool](b, `!!document.getElementById(`+jsString(form)+`)`) {
		return oracle.Result{}, fmt.Errorf("the page has no form for %s", tool)
	}
	var js strings.Builder
	js.WriteString(`for (const el of document.getElementById(` + jsString(form) + `).querySelectorAll("input, textarea")) el.value = "";`)
	for k, v := range args {
		var s string
		switch v := v.(type) {
		case string:
			s = v
		case int:
			s = strconv.Itoa(v)
		default:
			b, _ := json.Marshal(v)
			s = string(b)
		}
		fmt.Fprintf(&js, `document.getElementById(%s).value = %s;`, jsString(form+"-"+k), jsString(s))
	}
	js.WriteString("true")
	Eval[bool](b, js.String())
	if err := b.call(`document.getElementById(` + jsString(form+"-call") + `).click()`); err != nil {
		return oracle.Result{}, err
	}
	if e := Eval[string](b, `document.getElementById("error").textContent`); e != "" {
		return oracle.Result{}, fmt.Errorf("the page says: %s", e)
	}
	r := oracle.Result{
		Output: Eval[string](b, `document.getElementById("output").textContent`),
		Error:  strings.TrimPrefix(Eval[string](b, `document.getElementById("refusal").textContent`), "Refused: "),
		Done:   Eval[string](b, `document.getElementById("done").textContent`) == "done",
	}
	if v, ok := strings.CutPrefix(Eval[string](b, `document.getElementById("reward").textContent`), "reward: "); ok && v != "-" {
		r.Reward, _ = strconv.ParseFloat(v, 64)
	}
	return r, nil
}

// PlayOracle resets the page to its (bound) task and plays taskID's
// oracle through the forms; it returns the final result.
func (b *Browser) PlayOracle(taskID string) (oracle.Result, error) {
	task, errText, err := b.PlayReset("")
	if err != nil || errText != "" {
		return oracle.Result{}, fmt.Errorf("reset: %v %s", err, errText)
	}
	tk, err := tasks.Build(taskID)
	if err != nil {
		return oracle.Result{}, err
	}
	if task != tk.Instruction {
		return oracle.Result{}, fmt.Errorf("the page shows another task: %.80q", task)
	}
	orc, err := oracle.Load(taskID)
	if err != nil {
		return oracle.Result{}, err
	}
	return oracle.Play(tk.Kind, task, orc, tk.Files[0].Path, b.PlayStep)
}
