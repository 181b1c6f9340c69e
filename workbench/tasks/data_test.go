package tasks

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// TestDataWrongAnswers gives every data family a plausible mistake (the sum
// of every region, a mean that counts gaps as zero, a ranking read
// backwards...) and checks it is graded below 1 with the right reason.
func TestDataWrongAnswers(t *testing.T) {
	t.Parallel()
	runWrongAnswers(t, "data", []wrongAnswer{
		{
			family: "csv_region_total", reason: ReasonWrongNumber,
			answer: func(t *testing.T, task *Task) string { // every region summed
				total := 0.0
				for _, row := range csvRows(t, task, "sales.csv") {
					total += mustFloat(t, row["amount"])
				}
				return fmt.Sprintf("%.2f", total)
			},
		},
		{
			family: "json_top_customer", reason: ReasonWrongText,
			answer: func(t *testing.T, task *Task) string { // refunded and cancelled orders counted
				var doc struct {
					Orders []struct {
						Customer string
						Items    []struct {
							Qty       int
							UnitPrice string `json:"unit_price"`
						}
					}
				}
				mustJSON(t, task, "orders.json", &doc)
				totals := map[string]int{}
				for _, o := range doc.Orders {
					for _, it := range o.Items {
						totals[o.Customer] += it.Qty * int(mustFloat(t, it.UnitPrice)*100+0.5)
					}
				}
				best, _ := topTwo(totals)
				return best
			},
		},
		{
			family: "sensor_mean", reason: ReasonWrongNumber,
			answer: func(t *testing.T, task *Task) string { // gaps counted as 0
				sensor := quoted(t, task.Instruction, "of sensor ")
				sum, n := 0.0, 0
				for _, row := range csvRows(t, task, "readings.csv") {
					if row["sensor"] == sensor {
						if v, err := strconv.ParseFloat(row["temperature_c"], 64); err == nil {
							sum += v
						}
						n++
					}
				}
				return fmt.Sprintf("%.2f", sum/float64(n))
			},
		},
		{
			family: "duplicate_emails", reason: ReasonMissing,
			answer: func(t *testing.T, task *Task) string { // compared case-sensitively
				seen, dups := map[string]int{}, map[string]bool{}
				for _, row := range csvRows(t, task, "users.csv") {
					if seen[row["email"]]++; seen[row["email"]] == 2 {
						dups[strings.ToLower(row["email"])] = true
					}
				}
				return strings.Join(mapKeys(dups), ",")
			},
		},
		{
			family: "orphan_orders", reason: ReasonMissingExtra,
			answer: func(t *testing.T, task *Task) string { // one orphan missed, one good order added
				var orders []struct{ ID string }
				mustJSON(t, task, "orders.json", &orders)
				items := append([]string(nil), task.Key.Items[1:]...)
				for _, o := range orders {
					if indexOf(task.Key.Items, o.ID) < 0 {
						return strings.Join(append(items, o.ID), ",")
					}
				}
				t.Fatal("every order is an orphan")
				return ""
			},
		},
		{
			family: "top_products", reason: ReasonOrder,
			answer: func(t *testing.T, task *Task) string { // least first
				k := task.Key.Items
				return k[2] + "\n" + k[1] + "\n" + k[0]
			},
		},
		{
			family: "missing_columns", reason: ReasonExtra,
			answer: func(t *testing.T, task *Task) string { // every column
				content, _ := task.File("patients.csv")
				header, _, _ := strings.Cut(content, "\n")
				return header
			},
		},
		{
			family: "percent_change", reason: ReasonWrongNumber,
			answer: func(t *testing.T, task *Task) string { // relative to Q2 instead of Q1
				cat := quoted(t, task.Instruction, "of category ")
				sum := func(path string) float64 {
					s := 0.0
					for _, row := range csvRows(t, task, path) {
						if row["category"] == cat {
							s += mustFloat(t, row["net_amount"])
						}
					}
					return s
				}
				q1, q2 := sum("q1.csv"), sum("q2.csv")
				return fmt.Sprintf("%.2f", (q2-q1)/q2*100)
			},
		},
	})
}

// TestDataPartialSets checks a set answer missing one item earns partial
// credit for every data set family.
func TestDataPartialSets(t *testing.T) {
	t.Parallel()
	runPartialSets(t, "data")
}

func mustJSON(t *testing.T, task *Task, path string, v any) {
	t.Helper()
	content, ok := task.File(path)
	if !ok {
		t.Fatalf("%s: no %s", task.TaskID, path)
	}
	if err := json.Unmarshal([]byte(content), v); err != nil {
		t.Fatalf("%s: %s: %v", task.TaskID, path, err)
	}
}
