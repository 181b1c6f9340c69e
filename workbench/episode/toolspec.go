package episode

import (
	"encoding/json"
	"fmt"
)

// ToolSpec describes one agent tool to protocols that list tools (MCP):
// its name, what it does (the tools text's line, the limits, and the
// rule on refused calls) and a JSON Schema of its input. The schema
// documents; the environment decides: a call the schema would not accept
// reaches Step and is refused there, as through OpenEnv's step.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// Tools are the agent's tools under c's limits, in the order of the
// tools text; finish, the trainer's, is not among them.
func (c Config) Tools() []ToolSpec {
	l := c.resolved().Limits
	refused := fmt.Sprintf(" A refused call (bad arguments, a path outside the workspace, a limit reached) uses a tool call and counts as invalid: %s invalid calls in a row end the episode with reward 0.", countWord(l.MaxInvalidInARow))
	path := `"path":{"type":"string","description":"a path relative to the workspace"}`
	answer := `"answer":{"type":["string","number"],"description":"the answer, as the task asks for it"}`
	noArgs := `{"type":"object","properties":{},"additionalProperties":false}`
	spec := func(name, desc, schema string) ToolSpec {
		return ToolSpec{Name: name, Description: desc + refused, InputSchema: json.RawMessage(schema)}
	}
	return []ToolSpec{
		spec("list_files", "List the files in your workspace.", noArgs),
		spec("read_file", fmt.Sprintf("Show up to %d numbered lines of a file of your workspace, from start (1-based, default 1) to end.", l.ReadLines),
			`{"type":"object","properties":{`+path+`,"start":{"type":"integer","description":"first line, 1-based"},"end":{"type":"integer","description":"last line"}},"required":["path"],"additionalProperties":false}`),
		spec("run_python", fmt.Sprintf("Run a Python 3 script in your workspace (its directory is the working directory) and show its output, clipped to %d characters; %s s limit, no network.", l.OutputChars, seconds(l.PythonTimeout.Seconds())),
			`{"type":"object","properties":{"code":{"type":"string","description":"the script"}},"required":["code"],"additionalProperties":false}`),
		spec("write_file", fmt.Sprintf("Create or replace a file in your workspace (at most %d characters).", l.WriteChars),
			`{"type":"object","properties":{`+path+`,"content":{"type":"string"}},"required":["path","content"],"additionalProperties":false}`),
		spec("run_tests", "Code tasks only: run the examples of test_solution.py as given.", noArgs),
		spec("check", fmt.Sprintf("Ask whether an answer is correct before you submit (at most %d times; not for code tasks).", l.MaxChecks),
			`{"type":"object","properties":{`+answer+`},"required":["answer"],"additionalProperties":false}`),
		spec("submit", fmt.Sprintf("Give your final answer and end the episode; the result has the reward. You have %d tool calls in all: read the inputs before answering, and verify before you submit.", l.MaxSteps),
			`{"type":"object","properties":{`+answer+`},"required":["answer"],"additionalProperties":false}`),
	}
}
