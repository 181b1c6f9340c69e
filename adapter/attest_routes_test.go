package adapter_test

import (
	"slices"
	"testing"

	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/workbench/grader"
)

// TestGraderProtectedRoutes: the attestation probes exactly the workbench
// grader's protected routes (a route added to the grader must be added to
// attest.GraderProtectedRoutes, or the attestation would not probe it).
func TestGraderProtectedRoutes(t *testing.T) {
	want := []attest.GraderRoute{
		{Method: "POST", Path: grader.RouteScore}, {Method: "POST", Path: grader.RouteCases},
		{Method: "POST", Path: grader.RouteJudge}, {Method: "GET", Path: grader.RouteCounters},
	}
	if !slices.Equal(attest.GraderProtectedRoutes, want) {
		t.Fatalf("attest.GraderProtectedRoutes = %v, want the grader's %v", attest.GraderProtectedRoutes, want)
	}
}
