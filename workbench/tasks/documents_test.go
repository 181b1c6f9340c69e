package tasks

import "testing"

func TestDocumentTraps(t *testing.T) {
	checkTraps(t, "documents", documentTraps, []trapCase{
		{family: "meeting_actions", reason: ReasonExtra},          // every meeting's owners, not one meeting's
		{family: "contract_value", reason: ReasonWrongNumber},     // the amendment ignored
		{family: "changelog_breaking", reason: ReasonMissing},     // inline BREAKING: bullets missed
		{family: "team_table", reason: ReasonWrongText},           // role filter ignored
		{family: "milestone_order", reason: ReasonOrder},          // order of mention, not of date
		{family: "undefined_acronyms", reason: ReasonExtra},       // "defined before first use" misread
		{family: "requirements_count", reason: ReasonWrongNumber}, // withdrawn requirements counted
	})
}

func TestGrouped(t *testing.T) {
	for _, tt := range []struct {
		in   int64
		want string
	}{{0, "0"}, {999, "999"}, {1000, "1,000"}, {1234567, "1,234,567"}} {
		if got := grouped(tt.in); got != tt.want {
			t.Errorf("grouped(%d) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
