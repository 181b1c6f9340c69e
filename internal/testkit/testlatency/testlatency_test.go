package testlatency

import (
	"testing"
	"time"
)

func TestQuantile(t *testing.T) {
	t.Parallel()
	var s Samples
	for _, ms := range []int{9, 1, 5, 3, 7, 2, 4, 8, 6, 10} {
		s = append(s, time.Duration(ms)*time.Millisecond)
	}
	tests := []struct {
		name string
		q    float64
		want time.Duration
	}{
		{"min", 0, time.Millisecond},
		{"median", 0.5, 6 * time.Millisecond}, // nearest rank of 4.5 rounds up
		{"p90", 0.9, 9 * time.Millisecond},
		{"max", 1, 10 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := s.Quantile(tt.q); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
	if (Samples{}).Median() != 0 {
		t.Error("empty samples: median not 0")
	}
	if s[0] != 9*time.Millisecond {
		t.Error("Quantile reordered the samples")
	}
}
