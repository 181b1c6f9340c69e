package tasks

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
)

// dataFamilies are data-analysis tasks over CSV and JSON files.
func dataFamilies() []Family {
	return []Family{
		{
			Domain:  "data",
			Name:    "csv_region_total",
			Kind:    KindNumber,
			Summary: "sum one region's sales in a CSV file",
			Build:   buildCSVRegionTotal,
		},
		{
			Domain:  "data",
			Name:    "json_top_customer",
			Kind:    KindText,
			Summary: "find the customer who spent most on paid orders in a JSON file",
			Build:   buildJSONTopCustomer,
		},
		{
			Domain:  "data",
			Name:    "sensor_mean",
			Kind:    KindNumber,
			Summary: "average one sensor's readings in a CSV file, skipping missing values",
			Build:   buildSensorMean,
		},
		{
			Domain:  "data",
			Name:    "duplicate_emails",
			Kind:    KindSet,
			Summary: "list the e-mail addresses that appear on more than one row, ignoring case",
			Build:   buildDuplicateEmails,
		},
		{
			Domain:  "data",
			Name:    "orphan_orders",
			Kind:    KindSet,
			Summary: "find the orders in a JSON file whose customer is not in the customers CSV",
			Build:   buildOrphanOrders,
		},
		{
			Domain:  "data",
			Name:    "top_products",
			Kind:    KindList,
			Summary: "rank the three products with the most units sold in a JSON Lines file",
			Build:   buildTopProducts,
		},
		{
			Domain:  "data",
			Name:    "missing_columns",
			Kind:    KindSet,
			Summary: "name the CSV columns that have missing values",
			Build:   buildMissingColumns,
		},
		{
			Domain:  "data",
			Name:    "percent_change",
			Kind:    KindNumber,
			Summary: "compute one category's revenue change between two quarterly CSV files",
			Build:   buildPercentChange,
		},
	}
}

// cents formats an amount in cents as a decimal with two places.
func cents(c int) string {
	sign := ""
	if c < 0 {
		sign, c = "-", -c
	}
	return fmt.Sprintf("%s%d.%02d", sign, c/100, c%100)
}

var personNames = []string{"Ada Park", "Bruno Diaz", "Chen Wei", "Dara Okafor", "Elif Kaya", "Femi Adeyemi",
	"Greta Lund", "Hiro Tanaka", "Ines Duarte", "Jonas Berg", "Kavya Rao", "Lena Novak", "Mateo Rossi",
	"Nora Haddad", "Omar Farouk", "Priya Shah", "Quinn Byrne", "Rosa Lima", "Sven Holm", "Tara Quinn"}

func buildCSVRegionTotal(r *Rand, _ int) Built {
	regions := Sample(r, []string{"north", "south", "east", "west", "central", "coastal"}, 4)
	target := Pick(r, regions)
	var b strings.Builder
	b.WriteString("order_id,region,amount\n")
	total := 0
	for i := range r.Range(25, 40) {
		region := Pick(r, regions)
		c := r.Range(100, 99999)
		if region == target {
			total += c
		}
		fmt.Fprintf(&b, "%d,%s,%s\n", 1000+i, region, cents(c))
	}
	return Built{
		Instruction: fmt.Sprintf("sales.csv lists orders. What is the total amount of the orders in the %q "+
			"region? Answer with the number (two decimals; within 0.01 counts).", target),
		Files: map[string]string{"sales.csv": b.String()},
		Key:   Key{Answer: cents(total), Tolerance: 0.01},
	}
}

func buildJSONTopCustomer(r *Rand, _ int) Built {
	type item struct {
		SKU       string `json:"sku"`
		Qty       int    `json:"qty"`
		UnitPrice string `json:"unit_price"`
	}
	type order struct {
		ID       string `json:"order_id"`
		Customer string `json:"customer"`
		Status   string `json:"status"`
		Items    []item `json:"items"`
	}
	// Draw until the paid-only winner is clear and differs from the winner
	// over every status, so reading the status matters.
	for {
		customers := Sample(r, personNames, r.Range(5, 7))
		var orders []order
		paid, all := map[string]int{}, map[string]int{}
		for i := range r.Range(18, 28) {
			o := order{ID: fmt.Sprintf("SO-%05d", 10000+i*7+r.IntN(7)), Customer: Pick(r, customers),
				Status: Pick(r, []string{"paid", "paid", "paid", "refunded", "cancelled"})}
			total := 0
			for range r.Range(1, 3) {
				qty, price := r.Range(1, 5), r.Range(199, 24999)
				o.Items = append(o.Items, item{SKU: fmt.Sprintf("SKU-%03d", r.IntN(1000)), Qty: qty, UnitPrice: cents(price)})
				total += qty * price
			}
			all[o.Customer] += total
			if o.Status == "paid" {
				paid[o.Customer] += total
			}
			orders = append(orders, o)
		}
		bestPaid, secondPaid := topTwo(paid)
		bestAll, _ := topTwo(all)
		if bestPaid == bestAll || paid[bestPaid]-paid[secondPaid] < 100 {
			continue
		}
		data, _ := json.MarshalIndent(map[string]any{"currency": "EUR", "orders": orders}, "", "  ")
		return Built{
			Instruction: "orders.json holds a shop's orders; an order's value is the sum of qty x unit_price " +
				"over its items. Which customer has the highest total value of orders with status \"paid\" " +
				"(refunded and cancelled orders do not count)? Answer with the customer's name exactly as " +
				"written in the file (case and surrounding whitespace are ignored).",
			Files: map[string]string{"orders.json": string(data) + "\n"},
			Key:   Key{Answer: bestPaid},
		}
	}
}

// topTwo returns the keys with the largest and second-largest values (ties
// broken by name, so the result is deterministic).
func topTwo(m map[string]int) (string, string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	switch len(keys) {
	case 0:
		return "", ""
	case 1:
		return keys[0], ""
	}
	return keys[0], keys[1]
}

func buildSensorMean(r *Rand, _ int) Built {
	sensors := Sample(r, []string{"T-101", "T-102", "T-205", "T-310", "T-311", "T-412", "T-509"}, 4)
	target := sensors[0]
	var b strings.Builder
	b.WriteString("timestamp,sensor,temperature_c\n")
	sum, n, missing := 0, 0, 0
	minute := 0
	for range r.Range(40, 60) {
		minute += r.Range(1, 9)
		s := Pick(r, sensors)
		cell := ""
		if r.Chance(0.2) {
			cell = Pick(r, []string{"", "NA", "null"})
			if s == target {
				missing++
			}
		} else {
			tenths := r.Range(150, 320)
			cell = fmt.Sprintf("%d.%d", tenths/10, tenths%10)
			if s == target {
				sum += tenths
				n++
			}
		}
		fmt.Fprintf(&b, "2024-03-%02d %02d:%02d,%s,%s\n", 4+minute/1440, minute/60%24, minute%60, s, cell)
	}
	if n == 0 || missing == 0 { // make sure the target has readings and gaps
		fmt.Fprintf(&b, "2024-03-09 00:00,%s,21.5\n2024-03-09 00:05,%s,NA\n", target, target)
		sum += 215
		n++
	}
	mean := float64(sum) / 10 / float64(n)
	return Built{
		Instruction: fmt.Sprintf("readings.csv holds temperature readings. A reading that is empty, \"NA\" "+
			"or \"null\" is missing and must be skipped (not counted as 0). What is the mean "+
			"temperature_c of sensor %q? Answer with the number rounded to two decimals (within 0.01 "+
			"counts).", target),
		Files: map[string]string{"readings.csv": b.String()},
		Key:   Key{Answer: fmt.Sprintf("%.2f", mean), Tolerance: 0.01},
	}
}

func buildDuplicateEmails(r *Rand, _ int) Built {
	domains := []string{"example.com", "mail.test", "corp.example", "shop.test"}
	people := Sample(r, personNames, 14)
	emailOf := func(name string) string {
		first, last, _ := strings.Cut(strings.ToLower(name), " ")
		return Pick(r, []string{first + "." + last, first[:1] + last, first + "_" + last[:1]}) + "@" + Pick(r, domains)
	}
	type row struct{ name, email string }
	var rows []row
	for _, p := range people {
		rows = append(rows, row{p, emailOf(p)})
	}
	dups := Sample(r, rows, r.Range(3, 5))
	var want []string
	for i, d := range dups {
		want = append(want, d.email)
		e := d.email
		switch i % 3 { // one case-only variant is always among them
		case 0:
			e = strings.ToUpper(e[:1]) + e[1:]
		case 1:
			local, dom, _ := strings.Cut(e, "@")
			e = local + "@" + strings.ToUpper(dom)
		}
		rows = append(rows, row{d.name, e})
		if i == 1 {
			rows = append(rows, row{d.name, d.email}) // three rows for one address
		}
	}
	Shuffle(r, rows)
	var b strings.Builder
	b.WriteString("user_id,name,email,signup_date\n")
	for i, rw := range rows {
		fmt.Fprintf(&b, "%d,%s,%s,2024-%02d-%02d\n", 501+i, rw.name, rw.email, r.Range(1, 12), r.Range(1, 28))
	}
	sort.Strings(want)
	return Built{
		Instruction: "users.csv lists sign-ups. Which e-mail addresses appear on more than one row when " +
			"addresses are compared case-insensitively? Answer with each such address once, in lower " +
			"case, separated by commas (order does not matter; credit is the fraction found, reduced for " +
			"extra addresses).",
		Files: map[string]string{"users.csv": b.String()},
		Key:   Key{Items: want},
	}
}

func buildOrphanOrders(r *Rand, _ int) Built {
	var b strings.Builder
	b.WriteString("customer_id,name,country\n")
	known := map[string]bool{}
	var ids []string
	for i, p := range Sample(r, personNames, r.Range(8, 12)) {
		id := fmt.Sprintf("C%04d", 100+i*13+r.IntN(13))
		ids = append(ids, id)
		known[id] = true
		fmt.Fprintf(&b, "%s,%s,%s\n", id, p, Pick(r, []string{"DE", "FR", "NL", "SE", "PL", "ES"}))
	}
	type order struct {
		ID       string `json:"id"`
		Customer string `json:"customer_id"`
		Total    string `json:"total"`
	}
	var orders []order
	var want []string
	n := r.Range(18, 26)
	orphans := map[int]bool{}
	for k := r.Range(3, 5); len(orphans) < k; {
		orphans[r.IntN(n)] = true
	}
	for i := range n {
		o := order{ID: fmt.Sprintf("ORD-%d", 7000+i*3+r.IntN(3)), Customer: Pick(r, ids), Total: cents(r.Range(500, 90000))}
		if orphans[i] {
			// A near miss: a deleted customer, a typo'd number or a lower-case prefix.
			for known[o.Customer] {
				switch r.IntN(3) {
				case 0:
					o.Customer = fmt.Sprintf("C%04d", r.Range(100, 260))
				case 1:
					o.Customer = strings.ToLower(Pick(r, ids))
				default:
					o.Customer = Pick(r, ids) + " "
				}
			}
			want = append(want, o.ID)
		}
		orders = append(orders, o)
	}
	data, _ := json.MarshalIndent(orders, "", "  ")
	sort.Strings(want)
	return Built{
		Instruction: "customers.csv lists customers and orders.json lists orders. Which orders name a " +
			"customer_id that is not exactly a customer_id in customers.csv? Answer with the order ids, " +
			"separated by commas (order does not matter; credit is the fraction found, reduced for extra " +
			"ids).",
		Files: map[string]string{"customers.csv": b.String(), "orders.json": string(data) + "\n"},
		Key:   Key{Items: want},
	}
}

func buildTopProducts(r *Rand, _ int) Built {
	products := Sample(r, []string{"espresso beans", "oat milk", "green tea", "cocoa", "chai mix",
		"filter papers", "honey", "rye bread", "granola", "dark chocolate", "lemonade"}, 7)
	for {
		units, rows := map[string]int{}, map[string]int{}
		var b strings.Builder
		for i := range r.Range(30, 45) {
			p := Pick(r, products)
			q := r.Range(1, 12)
			if r.Chance(0.1) {
				q = r.Range(20, 40) // a bulk order
			}
			units[p] += q
			rows[p]++
			fmt.Fprintf(&b, "{\"ts\": \"2024-05-%02dT%02d:%02d:00Z\", \"product\": %q, \"units\": %d, \"store\": %q}\n",
				1+i%28, r.Range(8, 20), r.Range(0, 59), p, q, Pick(r, []string{"north", "harbour", "old town"}))
		}
		ranked := rankDesc(units)
		byRows := rankDesc(rows)
		if len(ranked) < 4 || units[ranked[2]] == units[ranked[3]] || units[ranked[0]] == units[ranked[1]] ||
			units[ranked[1]] == units[ranked[2]] || strings.Join(byRows[:3], ",") == strings.Join(ranked[:3], ",") {
			continue
		}
		return Built{
			Instruction: "sales.jsonl holds one sale per line (JSON). Which three products sold the most " +
				"units (sum of units)? Answer with the three product names, most units first, separated " +
				"by commas (order matters; each position is scored).",
			Files: map[string]string{"sales.jsonl": b.String()},
			Key:   Key{Items: ranked[:3]},
		}
	}
}

// rankDesc returns the keys of m by descending value, ties by name.
func rankDesc(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	return keys
}

func buildMissingColumns(r *Rand, _ int) Built {
	cols := []string{"patient_id", "age", "height_cm", "weight_kg", "blood_type", "visit_date",
		"clinic", "systolic", "diastolic", "smoker"}
	gen := map[string]func(i int) string{
		"patient_id": func(i int) string { return fmt.Sprintf("P%03d", 100+i) },
		"age":        func(int) string { return fmt.Sprint(r.Range(18, 90)) },
		"height_cm":  func(int) string { return fmt.Sprint(r.Range(150, 200)) },
		"weight_kg":  func(int) string { return fmt.Sprintf("%d.%d", r.Range(45, 120), r.IntN(10)) },
		"blood_type": func(int) string { return Pick(r, []string{"A+", "A-", "B+", "O+", "O-", "AB+"}) },
		"visit_date": func(int) string { return fmt.Sprintf("2024-%02d-%02d", r.Range(1, 12), r.Range(1, 28)) },
		"clinic":     func(int) string { return Pick(r, []string{"Riverside", "Hillcrest", "Eastgate"}) },
		"systolic":   func(int) string { return fmt.Sprint(r.Range(95, 160)) },
		"diastolic":  func(int) string { return fmt.Sprint(r.Range(60, 100)) },
		"smoker":     func(int) string { return Pick(r, []string{"yes", "no"}) },
	}
	holes := Sample(r, cols[1:], r.Range(3, 5))
	n := r.Range(25, 35)
	gaps := map[[2]int]string{}
	for _, h := range holes {
		ci := indexOf(cols, h)
		for range r.Range(1, 2) {
			gaps[[2]int{r.IntN(n), ci}] = Pick(r, []string{"", "NA", "N/A", "null"})
		}
	}
	var b strings.Builder
	b.WriteString(strings.Join(cols, ",") + "\n")
	for i := range n {
		cells := make([]string, len(cols))
		for ci, c := range cols {
			if v, ok := gaps[[2]int{i, ci}]; ok {
				cells[ci] = v
			} else {
				cells[ci] = gen[c](i)
			}
		}
		b.WriteString(strings.Join(cells, ",") + "\n")
	}
	sort.Strings(holes)
	return Built{
		Instruction: "patients.csv is an export with gaps. A cell is missing when it is empty or holds " +
			"\"NA\", \"N/A\" or \"null\". Which columns have at least one missing cell? Answer with the " +
			"column names as in the header, separated by commas (order does not matter; credit is the " +
			"fraction found, reduced for extra names).",
		Files: map[string]string{"patients.csv": b.String()},
		Key:   Key{Items: holes},
	}
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

func buildPercentChange(r *Rand, _ int) Built {
	cats := Sample(r, []string{"hardware", "software", "services", "training", "support", "licences"}, 4)
	target := Pick(r, cats)
	quarter := func(name string) (string, int) {
		var b strings.Builder
		b.WriteString("invoice,category,net_amount\n")
		total := 0
		for i := range r.Range(12, 20) {
			c := cats[i%len(cats)]
			if i >= len(cats) {
				c = Pick(r, cats)
			}
			amt := r.Range(5000, 400000)
			if c == target {
				total += amt
			}
			fmt.Fprintf(&b, "%s-%03d,%s,%s\n", name, i+1, c, cents(amt))
		}
		return b.String(), total
	}
	// Draw until the change is clear of the tolerance, so dividing by Q2
	// instead of Q1 gives a visibly different percentage.
	var q1, q2 string
	var change float64
	for {
		var t1, t2 int
		q1, t1 = quarter("Q1")
		q2, t2 = quarter("Q2")
		change = (float64(t2) - float64(t1)) / float64(t1) * 100
		if math.Abs(change-(float64(t2)-float64(t1))/float64(t2)*100) > 0.5 {
			break
		}
	}
	return Built{
		Instruction: fmt.Sprintf("q1.csv and q2.csv list the invoices of two quarters. By what percent did "+
			"the total net_amount of category %q change from Q1 to Q2, relative to Q1? Answer with the "+
			"number of percent with two decimals (negative for a decrease), e.g. -12.34; within 0.05 counts.", target),
		Files: map[string]string{"q1.csv": q1, "q2.csv": q2},
		Key:   Key{Answer: fmt.Sprintf("%.4f", change), Tolerance: 0.05},
	}
}
