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
// # Families
//
// Eight domains (software, data, logs, config, finance, sql, documents,
// security), at least six families each; "workbench tasks" lists them.
// Choices that shape every family:
//
//   - Each family is built so that a typical mistake gives a wrong answer
//     in every variant (a trap: cancelled orders counted, versions compared
//     as text, a commented-out override read, the row on a cut-off
//     counted); the domain tests check each trap scores below 1 with the
//     expected reason.
//   - A code family keeps its function name and its bug in every variant,
//     so one fixed solution.py (its oracle) fixes all variants; variants
//     change the cases. Case drawing retries until the bug shows in at
//     least one visible and two hidden cases.
//   - Workspace files are text: a SQL task ships its database as a
//     sqlite3 .dump (shop.sql) the agent loads into :memory:; YAML files
//     stay in a plain subset Python's standard library can read by hand.
//   - Fake secrets (AKIA..., ghp_..., xoxb-..., sk_live_...) are drawn from
//     the variant's generator and said to be synthetic; advisory ids and
//     vulnerable package names are invented; hosts are example.com/.org/.net.
//
// The package is pure: it builds files and scores strings. Running agent code
// for code tasks is the caller's business (see package episode); the hidden
// cases travel only inside Key.
package tasks
