package campaign

import "testing"

func TestOwnedBy(t *testing.T) {
	want := map[string]string{LabelCampaign: "c", LabelOwner: OwnerValue, LabelRole: RoleServer, "team": "a"}
	tests := []struct {
		name string
		have map[string]string
		ok   bool
	}{
		{"exact", map[string]string{LabelCampaign: "c", LabelOwner: OwnerValue, LabelRole: RoleServer, "team": "a"}, true},
		{"launcher_label_differs", map[string]string{LabelCampaign: "c", LabelOwner: OwnerValue, LabelRole: RoleServer, "team": "b"}, true},
		{"extra_reserved_label", map[string]string{LabelCampaign: "c", LabelOwner: OwnerValue, LabelRole: RoleServer, LabelAgent: "x"}, true},
		{"other_campaign", map[string]string{LabelCampaign: "d", LabelOwner: OwnerValue, LabelRole: RoleServer}, false},
		{"missing_role", map[string]string{LabelCampaign: "c", LabelOwner: OwnerValue}, false},
		{"empty_value_is_not_missing", map[string]string{LabelCampaign: "c", LabelOwner: OwnerValue, LabelRole: ""}, false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := OwnedBy(tt.have, want); got != tt.ok {
				t.Fatalf("OwnedBy = %v, want %v", got, tt.ok)
			}
		})
	}
	if OwnedBy(map[string]string{"team": "a"}, map[string]string{"team": "a"}) {
		t.Fatal("launcher labels alone proved ownership")
	}
	if OwnedBy(map[string]string{LabelRole: ""}, map[string]string{LabelRole: ""}) != true {
		t.Fatal("an empty reserved value present on both sides must match")
	}
	if OwnedBy(map[string]string{}, map[string]string{LabelRole: ""}) {
		t.Fatal("an absent label matched an empty wanted value")
	}
}
