// Package results is the episode results file: one JSON line per ended
// episode (Record), appended by `workbench serve --results-file` to a
// file of its run directory and read back, strictly, by the agentpen
// service that collects it into the campaign's state.
//
// The file sits in a directory the rootless daemon's user can write, so
// a reader treats every byte of it as hostile: Read opens nothing itself
// (the caller opens the file without following links, as a regular
// file), reads at most MaxFile bytes past what it read before, accepts
// only whole lines of at most MaxLine bytes, and refuses a line with an
// unknown field, a missing one, or a value out of its range, saying why
// (Refusal). A refused line is skipped, never repaired.
//
// It does not decide who may read the results, keep them, or what a
// reward means: the workbench's episode package makes a Record, the
// service stores and serves it.
package results
