package tasks

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

var accessLine = regexp.MustCompile(`^(\S+) \S+ \S+ \[[^\]]+\] "[^"]*" (\d{3}) \S+ "[^"]*" "[^"]*" (\S+)$`)

// TestLogsWrongAnswers gives every logs family a plausible mistake (client
// errors counted as failures, one file's first error, a grep for the word
// ERROR, an interpolated percentile...) and checks its grade and reason.
func TestLogsWrongAnswers(t *testing.T) {
	t.Parallel()
	reversed := func(t *testing.T, task *Task) string {
		items := slices.Clone(task.Key.Items)
		slices.Reverse(items)
		return strings.Join(items, ", ")
	}
	runWrongAnswers(t, "logs", []wrongAnswer{
		{
			family: "failed_requests", reason: ReasonExtra,
			answer: func(t *testing.T, task *Task) string { // 4xx counted as failures too
				content, _ := task.File("access.log")
				var ids []string
				for _, line := range strings.Split(strings.TrimSpace(content), "\n") {
					m := accessLine.FindStringSubmatch(line)
					if m == nil {
						t.Fatalf("%s: unparsable line %q", task.TaskID, line)
					}
					if m[2] >= "400" {
						ids = append(ids, m[3])
					}
				}
				return strings.Join(ids, ",")
			},
		},
		{
			family: "first_error", reason: ReasonWrongText,
			answer: func(t *testing.T, task *Task) string { // the first ERROR of the UTC instance's file
				for _, f := range task.Files {
					for _, line := range strings.Split(f.Content, "\n") {
						if strings.Contains(line, " ERROR ") && strings.Contains(line, "Z ERROR") {
							_, code, _ := strings.Cut(line, "code=")
							return code
						}
					}
				}
				t.Fatalf("%s: no UTC error line", task.TaskID)
				return ""
			},
		},
		{
			family: "error_count", reason: ReasonWrongNumber,
			answer: func(t *testing.T, task *Task) string { // every service's errors in the window
				m := regexp.MustCompile(`from (\S+ \S+) \(included\) to (\S+ \S+) \(excluded\)`).FindStringSubmatch(task.Instruction)
				from, _ := time.Parse(time.DateTime, m[1])
				to, _ := time.Parse(time.DateTime, m[2])
				content, _ := task.File("app.log")
				n := 0
				for _, line := range strings.Split(strings.TrimSpace(content), "\n") {
					f := strings.Fields(line)
					at, err := time.Parse(time.RFC3339, f[0])
					if err != nil {
						t.Fatal(err)
					}
					if f[3] == "ERROR" && !at.Before(from) && at.Before(to) {
						n++
					}
				}
				return strconv.Itoa(n)
			},
		},
		{
			family: "latency_p95", reason: ReasonWrongNumber,
			answer: func(t *testing.T, task *Task) string { // linear interpolation, numpy's default
				m := regexp.MustCompile(`route "([^"]+)" with method "([^"]+)"`).FindStringSubmatch(task.Instruction)
				var xs []int
				content, _ := task.File("requests.jsonl")
				for _, line := range strings.Split(strings.TrimSpace(content), "\n") {
					if strings.Contains(line, `"method":"`+m[2]+`","route":"`+m[1]+`"`) {
						_, v, _ := strings.Cut(line, `"latency_ms":`)
						n, err := strconv.Atoi(strings.TrimSuffix(v, "}"))
						if err != nil {
							t.Fatal(err)
						}
						xs = append(xs, n)
					}
				}
				return fmt.Sprintf("%.2f", interpolatedP95(xs))
			},
		},
		{family: "top_ips", reason: ReasonOrder, answer: reversed},
		{
			family: "brute_force_ips", reason: ReasonExtra,
			answer: func(t *testing.T, task *Task) string { // off by one: four failures counted
				content, _ := task.File("auth.log")
				fails := map[string]int{}
				re := regexp.MustCompile(`Failed password for (?:invalid user )?\S+ from (\S+) port`)
				for _, m := range re.FindAllStringSubmatch(content, -1) {
					fails[m[1]]++
				}
				var ips []string
				for ip, n := range fails {
					if n >= 4 {
						ips = append(ips, ip)
					}
				}
				return strings.Join(ips, "\n")
			},
		},
		{family: "trace_path", reason: ReasonOrder, answer: reversed},
	})
}

// TestLogsPartialSets checks partial credit for the logs set families and
// order errors for its list families.
func TestLogsPartialSets(t *testing.T) {
	t.Parallel()
	runPartialSets(t, "logs")
}
