package tasks

import "fmt"

// softwareFamilies are code tasks: fix a planted bug in solution.py so the
// examples in test_solution.py and the hidden cases pass.
func softwareFamilies() []Family {
	return []Family{
		{
			Domain:  "software",
			Name:    "median",
			Kind:    KindCode,
			Summary: "fix median() so it handles lists of even length",
			Build:   buildMedian,
		},
	}
}

func buildMedian(r *Rand, variant int) Built {
	list := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = r.Range(-50, 200)
		}
		return out
	}
	median := func(xs []any) any {
		s := make([]int, len(xs))
		for i, x := range xs {
			s[i] = x.(int)
		}
		for i := range s { // insertion sort: tiny inputs
			for j := i; j > 0 && s[j] < s[j-1]; j-- {
				s[j], s[j-1] = s[j-1], s[j]
			}
		}
		n := len(s)
		if n%2 == 1 {
			return s[n/2]
		}
		return float64(s[n/2-1]+s[n/2]) / 2
	}
	mk := func(n int) Case { xs := list(n); return Case{Args: []any{xs}, Want: median(xs)} }
	visible := []Case{mk(3), mk(5), mk(4)}
	hidden := []Case{mk(1), mk(2), mk(6), mk(7), mk(8), mk(10)}
	return Built{
		Instruction: fmt.Sprintf("solution.py defines median(values), which should return the median of a "+
			"non-empty list of integers (the mean of the two middle values when the length is even). It is "+
			"wrong for some inputs. Fix it so the examples in test_solution.py and the hidden cases pass, then "+
			"submit any short note as your answer. (variant %d)", variant),
		Files: map[string]string{
			"solution.py": `def median(values):
    """Return the median of a non-empty list of integers."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle]
`,
		},
		Function: "median",
		Visible:  visible,
		Key:      Key{Hidden: hidden},
	}
}
