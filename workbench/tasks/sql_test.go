package tasks

import (
	"strings"
	"testing"
)

func TestSQLTraps(t *testing.T) {
	checkTraps(t, "sql", sqlTraps, []trapCase{
		{family: "top_customer", reason: ReasonWrongText},            // cancelled and refunded orders counted
		{family: "monthly_revenue", reason: ReasonWrongNumber},       // every status counted
		{family: "unsold_products", reason: ReasonMissing},           // NOT IN order_items ignores cancellations
		{family: "category_ranking", reason: ReasonOrder},            // ranked by revenue, not units
		{family: "repeat_customers", reason: ReasonExtra},            // cancelled orders counted
		{family: "avg_order_value", reason: ReasonWrongNumber},       // AVG over item lines, not orders
		{family: "customer_totals_fix", reason: ReasonHiddenPartial}, // WHERE undoes the LEFT JOIN
	})
}

func TestShopDumpQuotes(t *testing.T) {
	s := &shopDB{customers: []shopCustomer{{id: 1, name: "Ava O'Neil", email: "ava.oneil@example.com"}}}
	if got := s.dump(); !strings.Contains(got, "'Ava O''Neil'") {
		t.Errorf("dump does not double a quote inside a string:\n%s", got)
	}
}
