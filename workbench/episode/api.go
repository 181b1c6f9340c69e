package episode

import (
	"encoding/json"
)

// Action is one tool call: {"tool": "read_file", "args": {"path": "a.txt"}}.
// Args keeps each value as raw JSON so the environment can tell an integer
// from a float and a string from a number, as the seed's checks do.
type Action struct {
	Tool string                     `json:"tool"`
	Args map[string]json.RawMessage `json:"args"`
}

// Observation is what one reset or step returns. Done, Reward and Metadata
// are carried beside the observation on the wire (see package server), so
// they are not part of its JSON.
type Observation struct {
	// Task is the instruction; set on the reset observation only.
	Task string `json:"task"`
	// Tools is the tools text; set on the reset observation only.
	Tools string `json:"tools"`
	// Output is what the tool printed, clipped and valid UTF-8.
	Output string `json:"output"`
	// Error is the reason a call was refused; empty when it was not.
	Error string `json:"error"`
	// StepsLeft is how many tool calls remain.
	StepsLeft int `json:"steps_left"`

	Done     bool           `json:"-"`
	Reward   float64        `json:"-"`
	Metadata map[string]any `json:"-"`
}

// State is the episode's identity and progress.
type State struct {
	EpisodeID string `json:"episode_id"`
	StepCount int    `json:"step_count"`
}

// ResetOptions are the reset keyword arguments of the OpenEnv protocol. A nil
// Seed means 0; an empty EpisodeID gets a fresh uuid; an empty TaskID picks
// ids[seed % len(ids)] of the sorted catalogue.
type ResetOptions struct {
	Seed      *int64
	EpisodeID string
	TaskID    string
}
