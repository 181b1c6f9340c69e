// Package tasks is the workbench's task catalogue: eight work domains, several
// task families each, and for every family a deterministic builder of
// variants.
//
// A task id is "domain/family" and may carry a variant, "domain/family@N"
// (the plain id is variant 0). Build turns an id into a Task: the files of a
// private workspace, an instruction, and an answer key. The same id always
// builds byte-identical files; different variants change the files' names,
// numbers and rows, so an answer cannot be memorised across variants.
//
// An answer is graded by kind (see Kind): a number within a stated tolerance,
// normalised text, a set with partial credit, an ordered list, or code whose
// function is called on visible cases (the examples in test_solution.py) and
// hidden cases (kept in the Key, never written to the workspace).
//
// The package is pure: it builds files and scores strings. Running agent code
// for code tasks is the caller's business (see package episode); the hidden
// cases travel only inside Key.
package tasks
