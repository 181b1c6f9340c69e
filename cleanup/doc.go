// Package cleanup decides, from a campaign's journal and what the daemon
// says about each journalled resource, what may be removed, and (with the
// cleanup issue) proves afterwards that it was. It is pure: observations
// in, decisions and reports out. It never talks to Docker, the network or
// a subprocess, and never touches a file (a dependency test in the
// repository root enforces that); the adapter observes, asks Decide, and
// acts on the answer.
//
// The rule it keeps is agentpen's custody promise: a resource is removed
// only by the id the journal recorded, and only when the daemon's own
// answer for that id carries the ownership labels the journal's intent
// recorded (campaign.OwnedBy). Nothing is ever chosen by a name pattern or
// a label filter.
package cleanup
