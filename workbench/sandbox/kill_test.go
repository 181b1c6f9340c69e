package sandbox

import "testing"

func TestStatusMatches(t *testing.T) {
	t.Parallel()
	status := func(state, threads, uids string) []byte {
		return []byte("Name:\tpython3\nState:\t" + state + "\nTgid:\t7\nUid:\t" + uids + "\nGid:\t20000\t20000\t20000\t20000\nThreads:\t" + threads + "\n")
	}
	tests := []struct {
		name              string
		status            []byte
		wantLive, wantUID bool
	}{
		{"running", status("R (running)", "1", "20000\t20000\t20000\t20000"), true, true},
		{"sleeping_other_uid", status("S (sleeping)", "1", "20001\t20001\t20001\t20001"), true, false},
		{"fsuid_only", status("S (sleeping)", "1", "0\t0\t0\t20000"), true, true},
		{"zombie", status("Z (zombie)", "1", "20000\t20000\t20000\t20000"), false, true},
		{"dead", status("X (dead)", "1", "20000\t20000\t20000\t20000"), false, true},
		// The leader called exit(2) alone; another thread still runs.
		{"zombie_leader_live_thread", status("Z (zombie)", "2", "20000\t20000\t20000\t20000"), true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			live, match := statusMatches(tt.status, 20000)
			if live != tt.wantLive || match != tt.wantUID {
				t.Errorf("statusMatches = live %v, match %v; want %v, %v", live, match, tt.wantLive, tt.wantUID)
			}
		})
	}
}
