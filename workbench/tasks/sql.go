package tasks

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// sqlTraps are the sql domain's families. Each workspace holds shop.sql, a
// sqlite3 .dump of a small web shop: the workspace is text, so the database
// travels as its dump and the agent loads it with executescript into an
// in-memory database (the instruction says how).
var sqlTraps = []trapFamily{
	{"top_customer", KindText, "find the customer with the most revenue from completed orders", genTopCustomer},
	{"monthly_revenue", KindNumber, "total one month's revenue from completed orders", genMonthlyRevenue},
	{"unsold_products", KindSet, "find products that no non-cancelled order contains", genUnsoldProducts},
	{"category_ranking", KindList, "rank product categories by units sold", genCategoryRanking},
	{"repeat_customers", KindSet, "find customers with several orders in one year", genRepeatCustomers},
	{"avg_order_value", KindNumber, "average order value of one country's delivered orders", genAvgOrderValue},
	{"customer_totals_fix", KindCode, "fix a query that drops customers without orders", genCustomerTotalsFix},
}

// sqlFamilies are tasks over a SQLite database queried with Python's sqlite3.
func sqlFamilies() []Family { return trapFamilies("sql", sqlTraps) }

const sqlLoadHint = "shop.sql is a SQLite dump of a web shop (tables customers, products, orders, order_items); " +
	"load it with sqlite3.connect(\":memory:\").executescript(open(\"shop.sql\").read()). "

type shopCustomer struct {
	id                         int
	name, email, city, country string
	joined                     string
}

type shopProduct struct {
	id                  int
	sku, name, category string
	price               int64 // cents
}

type shopOrder struct {
	id, customer int
	at           time.Time
	status       string
}

type shopItem struct {
	order, product, qty int
	price               int64 // cents
}

// shopDB is a generated shop database and its dump.
type shopDB struct {
	customers []shopCustomer
	products  []shopProduct
	orders    []shopOrder
	items     []shopItem
	// centsSchema stores prices as INTEGER cents (unit_price_cents) rather
	// than REAL.
	centsSchema bool
}

var shopCities = [][2]string{{"Lisbon", "Portugal"}, {"Porto", "Portugal"}, {"Lyon", "France"},
	{"Paris", "France"}, {"Munich", "Germany"}, {"Berlin", "Germany"}, {"Toronto", "Canada"},
	{"Austin", "USA"}, {"Denver", "USA"}, {"Osaka", "Japan"}, {"Leeds", "UK"}}

var shopCatalog = map[string][]string{
	"Kitchen":  {"Cast Iron Skillet", "Chef Knife", "Pour-Over Kettle", "Spice Rack"},
	"Garden":   {"Pruning Shears", "Seed Starter Kit", "Hose Reel", "Raised Bed"},
	"Office":   {"Desk Lamp", "Notebook A5", "Gel Pens (12)", "Monitor Arm"},
	"Outdoors": {"Trail Backpack", "Camping Stove", "Headlamp", "Water Filter"},
	"Audio":    {"Bluetooth Speaker", "Studio Headphones", "USB Microphone", "Turntable Mat"},
	"Toys":     {"Wooden Puzzle", "Stunt Kite", "Building Blocks", "Marble Run"},
	"Fitness":  {"Yoga Mat", "Kettlebell 12kg", "Jump Rope", "Foam Roller"},
}

var shopCategories = []string{"Audio", "Fitness", "Garden", "Kitchen", "Office", "Outdoors", "Toys"}

// newShop makes customers and products, and no orders.
func newShop(r *Rand, nCustomers, nCategories int) *shopDB {
	s := &shopDB{}
	for i, name := range people(r, nCustomers) {
		given, family, _ := strings.Cut(name, " ")
		email := strings.ToLower(given + "." + strings.ReplaceAll(family, "'", ""))
		city := Pick(r, shopCities)
		joined := time.Date(r.Range(2019, 2022), time.Month(r.Range(1, 12)), r.Range(1, 28), 0, 0, 0, 0, time.UTC)
		s.customers = append(s.customers, shopCustomer{id: i + 1, name: name,
			email: email + "@" + Pick(r, []string{"example.com", "example.org", "example.net"}),
			city:  city[0], country: city[1], joined: ymd(joined)})
	}
	skus := map[string]bool{}
	for _, cat := range Sample(r, shopCategories, nCategories) {
		for _, name := range Sample(r, shopCatalog[cat], 3) {
			sku := ""
			for sku == "" || skus[sku] {
				sku = fmt.Sprintf("%s-%03d", strings.ToUpper(cat[:3]), r.Range(100, 999))
			}
			skus[sku] = true
			s.products = append(s.products, shopProduct{id: len(s.products) + 1, sku: sku, name: name,
				category: cat, price: int64(r.Range(4, 250))*100 - int64(Pick(r, []int{1, 5, 51, 0}))})
		}
	}
	return s
}

// addOrder records an order and its lines (product index, quantity).
func (s *shopDB) addOrder(customer int, at time.Time, status string, lines ...[2]int) int {
	id := len(s.orders) + 1
	s.orders = append(s.orders, shopOrder{id: id, customer: customer, at: at, status: status})
	for _, l := range lines {
		p := s.products[l[0]]
		s.items = append(s.items, shopItem{order: id, product: p.id, qty: l[1], price: p.price})
	}
	return id
}

// randomLines returns 1 to 3 distinct order lines, avoiding the products
// skip holds (by index).
func (s *shopDB) randomLines(r *Rand, skip map[int]bool) [][2]int {
	var lines [][2]int
	used := map[int]bool{}
	for range r.Range(1, 3) {
		p := r.IntN(len(s.products))
		if skip[p] || used[p] {
			continue
		}
		used[p] = true
		lines = append(lines, [2]int{p, r.Range(1, 4)})
	}
	if len(lines) == 0 {
		for p := range s.products {
			if !skip[p] {
				return [][2]int{{p, 1}}
			}
		}
	}
	return lines
}

func randomStatus(r *Rand) string {
	switch n := r.IntN(100); {
	case n < 55:
		return "delivered"
	case n < 70:
		return "shipped"
	case n < 80:
		return "processing"
	case n < 92:
		return "cancelled"
	}
	return "refunded"
}

// randomOrders adds n orders at random times in [start, start+days).
func (s *shopDB) randomOrders(r *Rand, n int, start time.Time, days int, skip map[int]bool) {
	for range n {
		at := start.Add(time.Duration(r.IntN(days*86400)) * time.Second)
		s.addOrder(r.Range(1, len(s.customers)), at, randomStatus(r), s.randomLines(r, skip)...)
	}
}

// sortOrders renumbers orders by time, as a shop's ids would run.
func (s *shopDB) sortOrders() {
	idx := make([]int, len(s.orders))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return s.orders[idx[a]].at.Before(s.orders[idx[b]].at) })
	newID := map[int]int{}
	var orders []shopOrder
	for n, i := range idx {
		o := s.orders[i]
		newID[o.id] = n + 1
		o.id = n + 1
		orders = append(orders, o)
	}
	s.orders = orders
	for i := range s.items {
		s.items[i].order = newID[s.items[i].order]
	}
	sort.SliceStable(s.items, func(a, b int) bool { return s.items[a].order < s.items[b].order })
}

// orderTotals returns each order's total in cents, by order id.
func (s *shopDB) orderTotals() map[int]int64 {
	t := map[int]int64{}
	for _, it := range s.items {
		t[it.order] += int64(it.qty) * it.price
	}
	return t
}

func sqlQuote(v string) string { return "'" + strings.ReplaceAll(v, "'", "''") + "'" }

// dump renders the database as sqlite3's .dump would.
func (s *shopDB) dump() string {
	var b strings.Builder
	price := "price REAL NOT NULL"
	unit := "unit_price REAL NOT NULL"
	num := func(c int64) string { return money(c) }
	if s.centsSchema {
		price, unit = "price_cents INTEGER NOT NULL", "unit_price_cents INTEGER NOT NULL"
		num = func(c int64) string { return fmt.Sprint(c) }
	}
	b.WriteString("PRAGMA foreign_keys=OFF;\nBEGIN TRANSACTION;\n")
	b.WriteString("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL UNIQUE, " +
		"city TEXT, country TEXT, joined_on TEXT);\n")
	for _, c := range s.customers {
		fmt.Fprintf(&b, "INSERT INTO customers VALUES(%d,%s,%s,%s,%s,%s);\n", c.id, sqlQuote(c.name),
			sqlQuote(c.email), sqlQuote(c.city), sqlQuote(c.country), sqlQuote(c.joined))
	}
	fmt.Fprintf(&b, "CREATE TABLE products (id INTEGER PRIMARY KEY, sku TEXT NOT NULL UNIQUE, name TEXT NOT NULL, "+
		"category TEXT NOT NULL, %s);\n", price)
	for _, p := range s.products {
		fmt.Fprintf(&b, "INSERT INTO products VALUES(%d,%s,%s,%s,%s);\n", p.id, sqlQuote(p.sku), sqlQuote(p.name),
			sqlQuote(p.category), num(p.price))
	}
	b.WriteString("CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id), " +
		"ordered_at TEXT NOT NULL, status TEXT NOT NULL);\n")
	for _, o := range s.orders {
		fmt.Fprintf(&b, "INSERT INTO orders VALUES(%d,%d,%s,%s);\n", o.id, o.customer,
			sqlQuote(o.at.Format("2006-01-02 15:04:05")), sqlQuote(o.status))
	}
	fmt.Fprintf(&b, "CREATE TABLE order_items (order_id INTEGER NOT NULL REFERENCES orders(id), product_id INTEGER "+
		"NOT NULL REFERENCES products(id), quantity INTEGER NOT NULL, %s);\n", unit)
	for _, it := range s.items {
		fmt.Fprintf(&b, "INSERT INTO order_items VALUES(%d,%d,%d,%s);\n", it.order, it.product, it.qty, num(it.price))
	}
	b.WriteString("CREATE INDEX idx_orders_customer ON orders(customer_id);\nCOMMIT;\n")
	return b.String()
}

func completed(status string) bool { return status == "delivered" || status == "shipped" }

func genTopCustomer(r *Rand, _ int) (Built, string) {
	s := newShop(r, r.Range(12, 18), r.Range(4, 6))
	start := time.Date(r.Range(2022, 2024), time.Month(r.Range(1, 6)), 1, 0, 0, 0, 0, time.UTC)
	s.randomOrders(r, r.Range(50, 70), start, 180, nil)
	rank := func(all bool) []int { // customer ids by revenue, best first
		rev := map[int]int64{}
		tot := s.orderTotals()
		for _, o := range s.orders {
			if all || completed(o.status) {
				rev[o.customer] += tot[o.id]
			}
		}
		ids := make([]int, len(s.customers))
		for i := range ids {
			ids[i] = i + 1
		}
		sort.SliceStable(ids, func(a, b int) bool { return rev[ids[a]] > rev[ids[b]] })
		return append(ids, int(rev[ids[0]]-rev[ids[1]]))
	}
	// Plant a large cancelled order for the runner-up, so counting every
	// status crowns the wrong customer.
	good := rank(false)
	if good[len(good)-1] < 100 {
		s.addOrder(good[0], start.AddDate(0, 0, r.Range(1, 170)), "delivered", [2]int{0, 1})
	}
	runnerUp := good[1]
	for rank(true)[0] != runnerUp {
		s.addOrder(runnerUp, start.AddDate(0, 0, r.Range(1, 170)), Pick(r, []string{"cancelled", "refunded"}),
			[2]int{r.IntN(len(s.products)), r.Range(3, 8)})
	}
	s.sortOrders()
	good = rank(false)
	return Built{
		Instruction: sqlLoadHint + "Revenue is the sum of quantity × unit_price over an order's items, and only " +
			"orders with status 'delivered' or 'shipped' count. Which customer brought in the most revenue? " +
			"Answer with the customer's name as stored (case and surrounding spaces are ignored).",
		Files: map[string]string{"shop.sql": s.dump()},
		Key:   Key{Answer: s.customers[good[0]-1].name},
	}, s.customers[runnerUp-1].name
}

func genMonthlyRevenue(r *Rand, _ int) (Built, string) {
	s := newShop(r, r.Range(10, 16), r.Range(4, 6))
	year := r.Range(2022, 2024)
	start := time.Date(year, time.Month(r.Range(1, 7)), 1, 0, 0, 0, 0, time.UTC)
	s.randomOrders(r, r.Range(60, 90), start, 150, nil)
	month := start.AddDate(0, r.Range(1, 3), 0)
	// A cancelled order and an order at the first second of the next month.
	s.addOrder(r.Range(1, len(s.customers)), month.Add(time.Duration(r.Range(3, 20))*24*time.Hour), "cancelled",
		s.randomLines(r, nil)...)
	s.addOrder(r.Range(1, len(s.customers)), month.AddDate(0, 1, 0), "delivered", s.randomLines(r, nil)...)
	s.sortOrders()
	tot := s.orderTotals()
	var want, all int64
	for _, o := range s.orders {
		if o.at.Year() == month.Year() && o.at.Month() == month.Month() {
			all += tot[o.id]
			if completed(o.status) {
				want += tot[o.id]
			}
		}
	}
	return Built{
		Instruction: sqlLoadHint + fmt.Sprintf("What was the revenue of %s %d: the sum of quantity × unit_price "+
			"over the items of orders placed in that month (by ordered_at) whose status is 'delivered' or "+
			"'shipped'? Answer with the number to 2 decimals (within 0.01 counts).",
			monthNames[month.Month()-1], month.Year()),
		Files: map[string]string{"shop.sql": s.dump()},
		Key:   Key{Answer: money(want), Tolerance: 0.01},
	}, money(all)
}

func genUnsoldProducts(r *Rand, _ int) (Built, string) {
	s := newShop(r, r.Range(10, 16), r.Range(5, 6))
	start := time.Date(r.Range(2022, 2024), time.Month(r.Range(1, 6)), 1, 0, 0, 0, 0, time.UTC)
	idx := make([]int, len(s.products))
	for i := range idx {
		idx[i] = i
	}
	picked := Sample(r, idx, r.Range(3, 5))
	nCancelled := r.Range(1, 2)
	skip := map[int]bool{}
	for _, p := range picked {
		skip[p] = true
	}
	s.randomOrders(r, r.Range(50, 70), start, 180, skip)
	for _, p := range picked[:nCancelled] {
		s.addOrder(r.Range(1, len(s.customers)), start.AddDate(0, 0, r.Range(0, 179)), "cancelled",
			[2]int{p, r.Range(1, 3)})
	}
	s.sortOrders()
	// The random orders may also leave a product unsold, or sold only in
	// cancelled orders: the key follows the data.
	sold, ordered := map[int]bool{}, map[int]bool{}
	status := map[int]string{}
	for _, o := range s.orders {
		status[o.id] = o.status
	}
	for _, it := range s.items {
		ordered[it.product] = true
		if status[it.order] != "cancelled" {
			sold[it.product] = true
		}
	}
	var want, mistake []string // mistake: NOT IN order_items, whatever the status
	for _, p := range s.products {
		if !sold[p.id] {
			want = append(want, p.sku)
		}
		if !ordered[p.id] {
			mistake = append(mistake, p.sku)
		}
	}
	return Built{
		Instruction: sqlLoadHint + "Which products have never been sold, that is, appear in no order whose " +
			"status is not 'cancelled' (products only in cancelled orders count as unsold)? Answer with " +
			"their SKUs, comma-separated, in any order.",
		Files: map[string]string{"shop.sql": s.dump()},
		Key:   Key{Items: want},
	}, strings.Join(mistake, ", ")
}

func genCategoryRanking(r *Rand, _ int) (Built, string) {
	s := newShop(r, r.Range(10, 16), r.Range(4, 6))
	start := time.Date(r.Range(2022, 2024), time.Month(r.Range(1, 6)), 1, 0, 0, 0, 0, time.UTC)
	s.randomOrders(r, r.Range(50, 80), start, 180, nil)
	measure := func() (units, revenue map[string]int64) {
		units, revenue = map[string]int64{}, map[string]int64{}
		status := map[int]string{}
		for _, o := range s.orders {
			status[o.id] = o.status
		}
		for _, it := range s.items {
			if status[it.order] == "cancelled" {
				continue
			}
			p := s.products[it.product-1]
			units[p.category] += int64(it.qty)
			revenue[p.category] += int64(it.qty) * it.price
		}
		return units, revenue
	}
	var cats []string
	for {
		units, _ := measure()
		cats = cats[:0]
		seen := map[string]bool{}
		for _, p := range s.products {
			if !seen[p.category] {
				seen[p.category] = true
				cats = append(cats, p.category)
			}
		}
		sort.SliceStable(cats, func(a, b int) bool { return units[cats[a]] > units[cats[b]] })
		tie := -1
		for i := 1; i < len(cats); i++ {
			if units[cats[i]] == units[cats[i-1]] {
				tie = i
			}
		}
		if tie < 0 {
			break
		}
		// Break the tie with one more delivered order of that category.
		for pi, p := range s.products {
			if p.category == cats[tie] {
				s.addOrder(r.Range(1, len(s.customers)), start.AddDate(0, 0, r.Range(0, 179)), "delivered", [2]int{pi, 1})
				break
			}
		}
	}
	s.sortOrders()
	_, revenue := measure()
	byRevenue := append([]string(nil), cats...)
	sort.SliceStable(byRevenue, func(a, b int) bool { return revenue[byRevenue[a]] > revenue[byRevenue[b]] })
	if strings.Join(byRevenue, ",") == strings.Join(cats, ",") {
		for i, j := 0, len(byRevenue)-1; i < j; i, j = i+1, j-1 {
			byRevenue[i], byRevenue[j] = byRevenue[j], byRevenue[i]
		}
	}
	return Built{
		Instruction: sqlLoadHint + "Rank the product categories by units sold (the sum of quantity over the " +
			"items of orders whose status is not 'cancelled'), most first. Answer with the category names in " +
			"that order, comma-separated.",
		Files: map[string]string{"shop.sql": s.dump()},
		Key:   Key{Items: cats},
	}, strings.Join(byRevenue, ", ")
}

func genRepeatCustomers(r *Rand, _ int) (Built, string) {
	s := newShop(r, r.Range(14, 20), r.Range(4, 6))
	year := r.Range(2022, 2024)
	minOrders := r.Range(3, 4)
	s.randomOrders(r, r.Range(40, 55), time.Date(year-1, 7, 1, 0, 0, 0, 0, time.UTC), 540, nil)
	in := func(o shopOrder) bool { return o.at.Year() == year }
	count := func(withCancelled bool) map[int]int {
		n := map[int]int{}
		for _, o := range s.orders {
			if in(o) && (withCancelled || o.status != "cancelled") {
				n[o.customer]++
			}
		}
		return n
	}
	at := func() time.Time {
		return time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(r.IntN(364*86400)) * time.Second)
	}
	// Two customers get exactly minOrders orders; a third one short by
	// one, plus a cancelled order; a fourth one short by one, plus an
	// order on the last evening of the year before.
	ids := Sample(r, func() []int {
		out := make([]int, len(s.customers))
		for i := range out {
			out[i] = i + 1
		}
		return out
	}(), 4)
	for k, c := range ids {
		target := minOrders
		if k >= 2 {
			target = minOrders - 1
		}
		for count(false)[c] < target {
			s.addOrder(c, at(), "delivered", s.randomLines(r, nil)...)
		}
		for count(false)[c] > target {
			for i := range s.orders {
				if s.orders[i].customer == c && in(s.orders[i]) && s.orders[i].status != "cancelled" {
					s.orders[i].at = s.orders[i].at.AddDate(-2, 0, 0) // move it out of the window
					break
				}
			}
		}
	}
	s.addOrder(ids[2], at(), "cancelled", s.randomLines(r, nil)...)
	s.addOrder(ids[3], time.Date(year-1, 12, 31, 21, r.Range(0, 59), 0, 0, time.UTC), "delivered", s.randomLines(r, nil)...)
	s.sortOrders()
	var want, mistake []string
	good, loose := count(false), count(true)
	for _, c := range s.customers {
		if good[c.id] >= minOrders {
			want = append(want, c.email)
		}
		if loose[c.id] >= minOrders {
			mistake = append(mistake, c.email)
		}
	}
	return Built{
		Instruction: sqlLoadHint + fmt.Sprintf("Which customers placed at least %d orders in %d (by ordered_at; "+
			"orders whose status is 'cancelled' do not count)? Answer with their email addresses, "+
			"comma-separated, in any order.", minOrders, year),
		Files: map[string]string{"shop.sql": s.dump()},
		Key:   Key{Items: want},
	}, strings.Join(mistake, ", ")
}

func genAvgOrderValue(r *Rand, _ int) (Built, string) {
	s := newShop(r, r.Range(16, 22), r.Range(4, 6))
	start := time.Date(r.Range(2022, 2024), time.Month(r.Range(1, 6)), 1, 0, 0, 0, 0, time.UTC)
	s.randomOrders(r, r.Range(60, 90), start, 200, nil)
	countries := map[string]int{}
	for _, c := range s.customers {
		countries[c.country]++
	}
	var country string
	for _, c := range s.customers { // the first customer's country with two or more customers
		if countries[c.country] >= 2 {
			country = c.country
			break
		}
	}
	if country == "" {
		country = s.customers[0].country
	}
	// Make sure the country has delivered orders with several lines.
	for _, c := range s.customers {
		if c.country == country {
			s.addOrder(c.id, start.AddDate(0, 0, r.Range(0, 199)), "delivered", [2]int{0, 2}, [2]int{len(s.products) - 1, 1})
			break
		}
	}
	s.sortOrders()
	tot := s.orderTotals()
	countryOf := map[int]string{}
	for _, c := range s.customers {
		countryOf[c.id] = c.country
	}
	var sum, lineSum int64
	var n, lines int64
	delivered := map[int]bool{}
	for _, o := range s.orders {
		if o.status == "delivered" && countryOf[o.customer] == country {
			sum += tot[o.id]
			n++
			delivered[o.id] = true
		}
	}
	for _, it := range s.items {
		if delivered[it.order] {
			lineSum += int64(it.qty) * it.price
			lines++
		}
	}
	avg := float64(sum) / float64(n) / 100
	return Built{
		Instruction: sqlLoadHint + fmt.Sprintf("What is the average order value of the orders with status "+
			"'delivered' placed by customers whose country is '%s'? An order's value is the sum of "+
			"quantity × unit_price over its items. Answer with the number to 2 decimals (within 0.01 counts).",
			country),
		Files: map[string]string{"shop.sql": s.dump()},
		Key:   Key{Answer: fmt.Sprintf("%.2f", avg), Tolerance: 0.01},
	}, fmt.Sprintf("%.2f", float64(lineSum)/float64(lines)/100)
}

const customerTotalsBuggy = `import sqlite3


def customer_totals(dump):
    """Return [[name, total_cents], ...] for every customer in the SQLite dump.

    total_cents is the sum of quantity * unit_price_cents over the items of the
    customer's orders whose status is not 'cancelled' (0 when there are none).
    Sorted by total_cents, largest first, then by name.
    """
    conn = sqlite3.connect(":memory:")
    conn.executescript(dump)
    rows = conn.execute(
        """
        SELECT c.name, SUM(oi.quantity * oi.unit_price_cents) AS total
        FROM customers c
        JOIN orders o ON o.customer_id = c.id
        JOIN order_items oi ON oi.order_id = o.id
        WHERE o.status != 'cancelled'
        GROUP BY c.id
        ORDER BY total DESC, c.name
        """
    ).fetchall()
    return [[name, total] for name, total in rows]
`

// customerTotalsHalfFix keeps customers who never ordered but still drops
// those whose every order was cancelled: the WHERE filter undoes the LEFT
// JOIN for them.
const customerTotalsHalfFix = `import sqlite3


def customer_totals(dump):
    conn = sqlite3.connect(":memory:")
    conn.executescript(dump)
    rows = conn.execute(
        """
        SELECT c.name, COALESCE(SUM(oi.quantity * oi.unit_price_cents), 0) AS total
        FROM customers c
        LEFT JOIN orders o ON o.customer_id = c.id
        LEFT JOIN order_items oi ON oi.order_id = o.id
        WHERE o.id IS NULL OR o.status != 'cancelled'
        GROUP BY c.id
        ORDER BY total DESC, c.name
        """
    ).fetchall()
    return [[name, total] for name, total in rows]
`

func genCustomerTotalsFix(r *Rand, _ int) (Built, string) {
	start := time.Date(r.Range(2022, 2024), time.Month(r.Range(1, 6)), 1, 0, 0, 0, 0, time.UTC)
	mk := func(allCancelled bool) Case {
		s := newShop(r, r.Range(5, 7), 2)
		s.centsSchema = true
		c := len(s.customers)
		// The last customer never ordered; with allCancelled the one before
		// ordered only to cancel. Everyone else has a delivered order.
		normal := c - 1
		if allCancelled {
			normal = c - 2
			s.addOrder(c-1, start.AddDate(0, 0, r.IntN(90)), "cancelled", s.randomLines(r, nil)...)
		}
		for id := 1; id <= normal; id++ {
			s.addOrder(id, start.AddDate(0, 0, r.IntN(90)), "delivered", s.randomLines(r, nil)...)
		}
		for range r.Range(3, 6) {
			s.addOrder(r.Range(1, normal), start.AddDate(0, 0, r.IntN(90)), randomStatus(r), s.randomLines(r, nil)...)
		}
		s.sortOrders()
		tot := s.orderTotals()
		sum := map[int]int64{}
		for _, o := range s.orders {
			if o.status != "cancelled" {
				sum[o.customer] += tot[o.id]
			}
		}
		cs := append([]shopCustomer(nil), s.customers...)
		sort.SliceStable(cs, func(a, b int) bool {
			if sum[cs[a].id] != sum[cs[b].id] {
				return sum[cs[a].id] > sum[cs[b].id]
			}
			return cs[a].name < cs[b].name
		})
		want := []any{}
		for _, cu := range cs {
			want = append(want, []any{cu.name, sum[cu.id]})
		}
		return Case{Args: []any{s.dump()}, Want: want}
	}
	visible := []Case{mk(false), mk(false)}
	hidden := []Case{mk(false), mk(true), mk(true), mk(false), mk(true)}
	return Built{
		Instruction: "solution.py defines customer_totals(dump): given the text of a SQLite dump of a shop " +
			"(tables customers, orders, order_items, products; prices in integer cents), it should return " +
			"[[name, total_cents], ...] for every customer, where total_cents sums quantity × unit_price_cents " +
			"over the items of the customer's orders whose status is not 'cancelled' (0 when there are none), " +
			"sorted by total_cents, largest first, then by name. It leaves some customers out. Fix it so the " +
			"examples in test_solution.py and the hidden cases pass, then submit a one-line summary of the fix.",
		Files:    map[string]string{"solution.py": customerTotalsBuggy},
		Function: "customer_totals",
		Visible:  visible,
		Key:      Key{Hidden: hidden},
	}, customerTotalsHalfFix
}
