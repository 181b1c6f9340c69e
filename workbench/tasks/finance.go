package tasks

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// trapBuilder builds one variant of a family and also returns the answer a
// plausible mistake gives: the classic trap the variant plants (a decoy
// row, a boundary case, an unfiltered status). Tests score that answer; the
// catalogue drops it.
type trapBuilder func(r *Rand, variant int) (b Built, mistake string)

// trapFamily is a family of the finance, sql, documents and security domains
// before it enters the catalogue.
type trapFamily struct {
	name    string
	kind    Kind
	summary string
	gen     trapBuilder
}

// trapFamilies turns a domain's trap families into catalogue families.
func trapFamilies(domain string, tfs []trapFamily) []Family {
	out := make([]Family, 0, len(tfs))
	for _, tf := range tfs {
		gen := tf.gen
		out = append(out, Family{
			Domain:  domain,
			Name:    tf.name,
			Kind:    tf.kind,
			Summary: tf.summary,
			Build:   func(r *Rand, v int) Built { b, _ := gen(r, v); return b },
		})
	}
	return out
}

// financeTraps are the finance domain's families.
var financeTraps = []trapFamily{
	{"bank_reconcile", KindSet, "find the ledger entries a bank statement does not reconcile", genBankReconcile},
	{"invoice_tax", KindNumber, "total an invoice with line discounts and VAT classes", genInvoiceTax},
	{"budget_variance", KindList, "rank the departments that overspent a quarter's budget", genBudgetVariance},
	{"fx_conversion", KindNumber, "convert an employee's expenses at monthly FX rates and total them", genFXConversion},
	{"duplicate_payments", KindSet, "find payments that pay the same vendor invoice twice", genDuplicatePayments},
	{"journal_imbalance", KindText, "find the journal entry whose debits and credits differ", genJournalImbalance},
	{"ar_aging", KindNumber, "total the receivables overdue by more than a threshold", genARAging},
}

// financeFamilies are spreadsheet and bookkeeping tasks over CSV files.
func financeFamilies() []Family { return trapFamilies("finance", financeTraps) }

// money renders an amount in cents as a decimal with two places.
func money(c int64) string {
	sign := ""
	if c < 0 {
		sign, c = "-", -c
	}
	return fmt.Sprintf("%s%d.%02d", sign, c/100, c%100)
}

var (
	givenNames = []string{"Ava", "Liam", "Noah", "Mia", "Priya", "Kenji", "Sofia", "Omar", "Elena", "Mateo",
		"Zoe", "Arjun", "Chloe", "Tariq", "Hana", "Lucas", "Ingrid", "Diego", "Amara", "Felix", "Nadia",
		"Jonas", "Leila", "Ravi", "Grace", "Emeka", "Yuki", "Marta"}
	familyNames = []string{"Okafor", "Lindqvist", "Moreau", "Tanaka", "Silva", "Kowalski", "Haddad", "Nguyen",
		"Fischer", "Rossi", "O'Neil", "Patel", "Costa", "Novak", "Berg", "Ibrahim", "Walsh", "Duarte",
		"Keller", "Sato", "Mensah", "Larsen"}
	vendorNames = []string{"Acme Industrial Supply", "Northwind Traders", "Bluebird Logistics",
		"Kestrel Office Goods", "Harbor Freight Partners", "Summit Cleaning Co", "Orion Software Ltd",
		"Pinecrest Catering", "Vertex Print Works", "Granite Security Services", "Lumen Electric",
		"Atlas Packaging", "Cobalt IT Services", "Meadow Facilities", "Beacon Legal LLP"}
	departmentNames = []string{"Engineering", "Marketing", "Sales", "Finance", "Operations", "Support",
		"Legal", "People", "Facilities", "Research"}
	monthNames = []string{"January", "February", "March", "April", "May", "June", "July", "August",
		"September", "October", "November", "December"}
)

// people returns n distinct full names.
func people(r *Rand, n int) []string {
	seen := map[string]bool{}
	var out []string
	for len(out) < n {
		name := Pick(r, givenNames) + " " + Pick(r, familyNames)
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	return out
}

func ymd(t time.Time) string { return t.Format("2006-01-02") }

// transposeDigits swaps two adjacent digits of an amount in cents, the
// classic keying error, and never returns c itself.
func transposeDigits(r *Rand, c int64) int64 {
	if c < 0 {
		return -transposeDigits(r, -c)
	}
	s := fmt.Sprint(c)
	for range 8 {
		if len(s) < 2 {
			break
		}
		i := r.IntN(len(s) - 1)
		if s[i] == s[i+1] || (i == 0 && s[1] == '0') {
			continue
		}
		b := []byte(s)
		b[i], b[i+1] = b[i+1], b[i]
		var out int64
		fmt.Sscan(string(b), &out)
		return out
	}
	return c + 900
}

func genBankReconcile(r *Rand, _ int) (Built, string) {
	year, month := r.Range(2022, 2025), r.Range(1, 12)
	prefix := Pick(r, []string{"CHQ", "TRF", "PAY", "REF"})
	next := r.Range(10000, 80000)
	vendors := Sample(r, vendorNames, 7)
	type entry struct {
		ref    string
		day    int
		payee  string
		amount int64
	}
	var ledger []entry
	for range r.Range(18, 26) {
		next += r.Range(1, 9)
		e := entry{ref: fmt.Sprintf("%s-%d", prefix, next), day: r.Range(1, 25)}
		if r.Chance(0.25) {
			e.payee = "Customer receipt " + Pick(r, familyNames)
			e.amount = int64(r.Range(20000, 900000))
		} else {
			e.payee = Pick(r, vendors)
			e.amount = -int64(r.Range(1500, 450000))
		}
		ledger = append(ledger, e)
	}
	sort.SliceStable(ledger, func(i, j int) bool { return ledger[i].day < ledger[j].day })
	idx := Sample(r, func() []int {
		s := make([]int, len(ledger))
		for i := range s {
			s[i] = i
		}
		return s
	}(), r.Range(3, 5))
	nMissing := len(idx) - r.Range(1, 2)
	missing, wrong := map[int]bool{}, map[int]bool{}
	var want, mistake []string
	for k, i := range idx {
		want = append(want, ledger[i].ref)
		if k < nMissing {
			missing[i] = true
			mistake = append(mistake, ledger[i].ref)
		} else {
			wrong[i] = true
		}
	}
	type line struct {
		day    int
		desc   string
		amount int64
	}
	var bank []line
	for i, e := range ledger {
		if missing[i] {
			continue
		}
		amt := e.amount
		if wrong[i] {
			amt = transposeDigits(r, amt)
		}
		var desc string
		if amt > 0 {
			desc = Pick(r, []string{"DEPOSIT %s", "BANK GIRO CREDIT REF %s", "INCOMING TRANSFER %s"})
			desc = fmt.Sprintf(desc, e.ref)
		} else {
			payee := strings.ToUpper(e.payee)
			switch r.IntN(3) {
			case 0:
				desc = fmt.Sprintf("DIRECT DEBIT %s REF %s", payee, e.ref)
			case 1:
				desc = fmt.Sprintf("%s PAID %s", e.ref, payee)
			default:
				desc = fmt.Sprintf("FASTER PAYMENT TO %s (%s)", payee, e.ref)
			}
		}
		bank = append(bank, line{day: min(e.day+r.Range(0, 3), 28), desc: desc, amount: amt})
	}
	bank = append(bank,
		line{day: 28, desc: "MONTHLY ACCOUNT FEE", amount: -int64(r.Range(500, 3500))},
		line{day: r.Range(1, 28), desc: "CARD PAYMENT COFFEE HOUSE", amount: -int64(r.Range(300, 2500))})
	if r.Chance(0.6) {
		bank = append(bank, line{day: 28, desc: "INTEREST CREDIT", amount: int64(r.Range(10, 900))})
	}
	sort.SliceStable(bank, func(i, j int) bool { return bank[i].day < bank[j].day })

	var lb, bb strings.Builder
	lb.WriteString("ref,date,payee,amount\n")
	for _, e := range ledger {
		fmt.Fprintf(&lb, "%s,%04d-%02d-%02d,%s,%s\n", e.ref, year, month, e.day, e.payee, money(e.amount))
	}
	bb.WriteString("date,description,withdrawal,deposit\n")
	for _, l := range bank {
		w, d := "", ""
		if l.amount < 0 {
			w = money(-l.amount)
		} else {
			d = money(l.amount)
		}
		fmt.Fprintf(&bb, "%04d-%02d-%02d,%s,%s,%s\n", year, month, l.day, l.desc, w, d)
	}
	return Built{
		Instruction: fmt.Sprintf("ledger.csv is the company's cash book for %s %d (amount is negative for money "+
			"paid out) and bank_statement.csv is the bank's statement of the same account. A ledger entry is "+
			"reconciled when a statement line's description mentions its ref and the line has the same amount "+
			"(withdrawals are money out). Which ledger entries are not reconciled, either missing from the "+
			"statement or with a different amount there? Answer with their refs, comma-separated, in any order.",
			monthNames[month-1], year),
		Files: map[string]string{"ledger.csv": lb.String(), "bank_statement.csv": bb.String()},
		Key:   Key{Items: want},
	}, strings.Join(mistake, ", ")
}

type vatCountry struct {
	name              string
	standard, reduced int
}

var vatCountries = []vatCountry{
	{"the United Kingdom", 20, 5}, {"Germany", 19, 7}, {"the Netherlands", 21, 9}, {"Ireland", 23, 13},
	{"Sweden", 25, 12}, {"Spain", 21, 10}, {"Italy", 22, 10}, {"Poland", 23, 8},
}

func genInvoiceTax(r *Rand, _ int) (Built, string) {
	country := Pick(r, vatCountries)
	type item struct {
		desc  string
		class string
		lo    int
		hi    int
	}
	catalog := []item{
		{"Laptop stand", "standard", 2500, 9000}, {"USB-C dock", "standard", 8000, 22000},
		{"Office chair", "standard", 12000, 45000}, {"Printer paper (box)", "standard", 1800, 4200},
		{"Technical handbook", "reduced", 2500, 7500}, {"Coffee beans 1kg", "reduced", 1400, 3200},
		{"Bottled water (case)", "reduced", 500, 1400}, {"Export freight", "zero", 9000, 40000},
		{"Consulting hour", "standard", 7500, 18000}, {"Safety goggles", "standard", 900, 2600},
		{"Children's book", "zero", 700, 2400}, {"Monitor 27in", "standard", 17000, 39000},
		{"Training course seat", "standard", 30000, 90000}, {"Magazine subscription", "reduced", 1200, 6000},
	}
	lines := Sample(r, catalog, r.Range(8, 12))
	rate := map[string]int{"standard": country.standard, "reduced": country.reduced, "zero": 0}
	discounts := []int{0, 0, 0, 5, 10, 15, 20}
	var b strings.Builder
	b.WriteString("line,description,qty,unit_price,discount_pct,tax_class\n")
	// Amounts in 1/1e6 of a cent: qty * cents * (100-d) * (100+rate).
	var total, noDiscount int64
	nDisc := 0
	for i, it := range lines {
		qty := int64(r.Range(1, 12))
		price := int64(r.Range(it.lo, it.hi))
		d := Pick(r, discounts)
		if i >= len(lines)-2 && nDisc < 2 {
			d = Pick(r, discounts[3:])
		}
		if d > 0 {
			nDisc++
		}
		total += qty * price * int64(100-d) * int64(100+rate[it.class])
		noDiscount += qty * price * 100 * int64(100+rate[it.class])
		fmt.Fprintf(&b, "%d,%s,%d,%s,%d,%s\n", i+1, it.desc, qty, money(price), d, it.class)
	}
	round := func(x int64) int64 { return (x + 5000) / 10000 }
	rates := fmt.Sprintf("# VAT rates applied by the supplier (%s)\nstandard: %d%%\nreduced: %d%%\nzero: 0%%\n",
		strings.TrimPrefix(country.name, "the "), country.standard, country.reduced)
	return Built{
		Instruction: "invoice.csv lists the lines of a supplier invoice and tax_rates.txt gives the VAT rate of " +
			"each tax class. A line's net amount is qty × unit_price less discount_pct percent; its VAT is its " +
			"net amount times its class's rate. What is the invoice's grand total (net plus VAT, over all lines)? " +
			"Round only the final total; answer with the number to 2 decimals (within 0.02 counts).",
		Files: map[string]string{"invoice.csv": b.String(), "tax_rates.txt": rates},
		Key:   Key{Answer: money(round(total)), Tolerance: 0.02},
	}, money(round(noDiscount))
}

func genBudgetVariance(r *Rand, _ int) (Built, string) {
	year, quarter := r.Range(2022, 2025), r.Range(1, 4)
	depts := Sample(r, departmentNames, r.Range(6, 7))
	categories := []string{"travel", "software", "hardware", "contractors", "events", "training", "supplies"}
	type expense struct {
		date   time.Time
		dept   string
		cat    string
		amount int64
	}
	var exps []expense
	spend := map[string]int64{}  // the quarter asked about
	spendQ := map[string]int64{} // "dept q" for every quarter
	start := time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, d := range depts {
		for range r.Range(12, 18) {
			e := expense{date: start.AddDate(0, 0, r.IntN(365)), dept: d, cat: Pick(r, categories),
				amount: int64(r.Range(20000, 1500000))}
			exps = append(exps, e)
			q := (int(e.date.Month())-1)/3 + 1
			spendQ[fmt.Sprint(d, q)] += e.amount
			if q == quarter {
				spend[d] += e.amount
			}
		}
	}
	sort.SliceStable(exps, func(i, j int) bool { return exps[i].date.Before(exps[j].date) })
	nOver := r.Range(2, 4)
	over := map[string]int64{}
	used := map[int64]bool{}
	var overDepts []string
	for _, d := range depts {
		if spend[d] < 200000 {
			continue // too little spend to overrun
		}
		if len(overDepts) == nOver {
			break
		}
		var by int64
		for by == 0 || used[by] || by >= spend[d] {
			by = int64(r.Range(3, 60)) * 10000
			if by >= spend[d] {
				by = spend[d] / 2 / 100 * 100
			}
		}
		used[by] = true
		over[d] = by
		overDepts = append(overDepts, d)
	}
	budget := func(d string, q int) int64 {
		if q == quarter {
			if by, ok := over[d]; ok {
				return spend[d] - by
			}
			return (spend[d]/10000+1)*10000 + int64(r.Range(0, 40))*10000
		}
		return spendQ[fmt.Sprint(d, q)]*int64(r.Range(85, 125))/100/10000*10000 + 50000
	}
	var bb strings.Builder
	bb.WriteString("department,quarter,budget\n")
	for _, d := range depts {
		for q := 1; q <= 4; q++ {
			fmt.Fprintf(&bb, "%s,%d-Q%d,%s\n", d, year, q, money(budget(d, q)))
		}
	}
	var eb strings.Builder
	eb.WriteString("date,department,category,amount\n")
	for _, e := range exps {
		fmt.Fprintf(&eb, "%s,%s,%s,%s\n", ymd(e.date), e.dept, e.cat, money(e.amount))
	}
	sort.SliceStable(overDepts, func(i, j int) bool { return over[overDepts[i]] > over[overDepts[j]] })
	rev := make([]string, len(overDepts))
	for i, d := range overDepts {
		rev[len(rev)-1-i] = d
	}
	return Built{
		Instruction: fmt.Sprintf("budget.csv gives each department's budget per quarter and expenses.csv lists "+
			"the year's expenses by date. Which departments spent more than their budget in %d-Q%d (Q1 is "+
			"January to March)? List them ordered by the amount overspent, largest first, comma-separated.",
			year, quarter),
		Files: map[string]string{"budget.csv": bb.String(), "expenses.csv": eb.String()},
		Key:   Key{Items: overDepts},
	}, strings.Join(rev, ", ")
}

func genFXConversion(r *Rand, _ int) (Built, string) {
	usdPer := map[string]float64{"USD": 1, "EUR": 1.08, "GBP": 1.27, "JPY": 0.0068, "CAD": 0.74,
		"CHF": 1.12, "AUD": 0.66, "SEK": 0.095, "INR": 0.012}
	all := []string{"USD", "EUR", "GBP", "JPY", "CAD", "CHF", "AUD", "SEK", "INR"}
	base := Pick(r, []string{"USD", "EUR", "GBP"})
	var foreign []string
	for _, c := range all {
		if c != base {
			foreign = append(foreign, c)
		}
	}
	foreign = Sample(r, foreign, 4)
	sort.Strings(foreign)
	currencies := append(append([]string(nil), foreign...), base)
	year, m0 := r.Range(2022, 2025), r.Range(1, 10)
	months := []string{}
	rate := map[string]float64{} // "2024-03 EUR" -> base per unit, as printed
	var rb strings.Builder
	fmt.Fprintf(&rb, "month,currency,rate_to_%s\n", base)
	for k := range 3 {
		m := fmt.Sprintf("%d-%02d", year, m0+k)
		months = append(months, m)
		for _, c := range foreign {
			v := usdPer[c] * (1 + float64(r.Range(-400, 400))/10000) / (usdPer[base] * (1 + float64(r.Range(-200, 200))/10000))
			s := fmt.Sprintf("%.6f", v)
			var parsed float64
			fmt.Sscan(s, &parsed)
			rate[m+" "+c] = parsed
			fmt.Fprintf(&rb, "%s,%s,%s\n", m, c, s)
		}
	}
	staff := people(r, 4)
	who := staff[0]
	cats := []string{"hotel", "taxi", "meals", "train", "conference fee", "flight", "client dinner"}
	var eb strings.Builder
	eb.WriteString("date,employee,category,amount,currency\n")
	var total, naive float64
	for i := range r.Range(22, 32) {
		emp := Pick(r, staff)
		if i < 3 {
			emp = who // the employee has expenses in every month
		}
		k := r.IntN(3)
		if i < 3 {
			k = i
		}
		day := r.Range(1, 28)
		cur := Pick(r, currencies)
		var amt string
		var val float64
		if cur == "JPY" {
			n := r.Range(1500, 90000)
			amt, val = fmt.Sprint(n), float64(n)
		} else {
			c := int64(r.Range(800, 120000))
			if cur == "INR" {
				c *= 60
			}
			if cur == "SEK" {
				c *= 10
			}
			amt = money(c)
			fmt.Sscan(amt, &val)
		}
		if emp == who {
			rt, rt0 := 1.0, 1.0
			if cur != base {
				rt, rt0 = rate[months[k]+" "+cur], rate[months[0]+" "+cur]
			}
			total += val * rt
			naive += val * rt0
		}
		fmt.Fprintf(&eb, "%s-%02d,%s,%s,%s,%s\n", months[k], day, emp, Pick(r, cats), amt, cur)
	}
	mistake := fmt.Sprintf("%.2f", naive)
	if d := naive - total; d < 0.1 && d > -0.1 {
		mistake = fmt.Sprintf("%.2f", total+12.5)
	}
	return Built{
		Instruction: fmt.Sprintf("expenses.csv lists expense claims in several currencies and rates.csv gives, "+
			"for each month, how many %[1]s one unit of a currency is worth. Convert each of %[2]s's expenses "+
			"to %[1]s at the rate of the month it was incurred in (amounts already in %[1]s stay as they are) "+
			"and add them up. Answer with the total in %[1]s to 2 decimals (within 0.05 counts).", base, who),
		Files: map[string]string{"expenses.csv": eb.String(), "rates.csv": rb.String()},
		Key:   Key{Answer: fmt.Sprintf("%.2f", total), Tolerance: 0.05},
	}, mistake
}

func genDuplicatePayments(r *Rand, _ int) (Built, string) {
	vendors := Sample(r, vendorNames, r.Range(6, 8))
	year := r.Range(2022, 2025)
	start := time.Date(year, time.Month(r.Range(1, 6)), 1, 0, 0, 0, 0, time.UTC)
	type pay struct {
		day     int
		seq     int
		vendor  string
		invoice string
		amount  int64
		dup     bool
		decoy   bool
	}
	var pays []pay
	inv := map[string]int{}
	newInvoice := func(v string) string {
		if inv[v] == 0 {
			inv[v] = r.Range(1000, 8000)
		}
		inv[v] += r.Range(1, 30) // strictly increasing: a vendor never reuses a number
		return fmt.Sprintf("INV-%d", inv[v])
	}
	n := r.Range(26, 34)
	for i := range n {
		v := Pick(r, vendors)
		pays = append(pays, pay{day: r.Range(0, 50), seq: i, vendor: v, invoice: newInvoice(v),
			amount: int64(r.Range(5000, 800000))})
	}
	respell := func(v string) string {
		switch r.IntN(3) {
		case 0:
			return strings.ToUpper(v)
		case 1:
			return strings.ToLower(v)
		}
		return v + " "
	}
	orig := Sample(r, pays, r.Range(2, 4))
	for i, o := range orig {
		d := o
		d.day, d.seq, d.dup, d.vendor = o.day+r.Range(1, 20), n+i, true, respell(o.vendor)
		pays = append(pays, d)
	}
	// Decoys: same invoice number and amount at another vendor; same vendor
	// and amount on another invoice; an instalment of the same invoice.
	a, b := orig[0], Pick(r, pays[:n])
	other := vendors[0]
	if other == a.vendor {
		other = vendors[1]
	}
	pays = append(pays,
		pay{day: a.day + r.Range(1, 15), seq: n + 10, vendor: other, invoice: a.invoice, amount: a.amount, decoy: true},
		pay{day: b.day + r.Range(1, 15), seq: n + 11, vendor: b.vendor, invoice: newInvoice(b.vendor), amount: b.amount},
		pay{day: b.day + r.Range(16, 30), seq: n + 12, vendor: b.vendor, invoice: b.invoice, amount: b.amount/2 + 1})
	sort.SliceStable(pays, func(i, j int) bool {
		if pays[i].day != pays[j].day {
			return pays[i].day < pays[j].day
		}
		return pays[i].seq < pays[j].seq
	})
	// A later duplicate could land before its original on the same day only
	// by seq order, which the sort keeps; an original is never dated after its copy.
	first := r.Range(4000, 9000)
	var sb strings.Builder
	sb.WriteString("payment_id,date,vendor,invoice_no,amount\n")
	var want, mistake []string
	for i, p := range pays {
		id := fmt.Sprintf("PMT-%d", first+i)
		fmt.Fprintf(&sb, "%s,%s,%s,%s,%s\n", id, ymd(start.AddDate(0, 0, p.day)), p.vendor, p.invoice, money(p.amount))
		if p.dup {
			want = append(want, id)
		}
		if p.dup || p.decoy {
			mistake = append(mistake, id)
		}
	}
	return Built{
		Instruction: "payments.csv lists outgoing vendor payments. A payment is a duplicate when an earlier " +
			"payment (by date, then by position in the file) went to the same vendor for the same invoice_no " +
			"and the same amount; vendor names compare ignoring case and surrounding spaces. Which payments " +
			"are duplicates? Answer with their payment_ids (not the first payment of each invoice), " +
			"comma-separated, in any order.",
		Files: map[string]string{"payments.csv": sb.String()},
		Key:   Key{Items: want},
	}, strings.Join(mistake, ", ")
}

var ledgerAccounts = []string{"1000 Cash", "1200 Accounts Receivable", "1400 Inventory", "1500 Equipment",
	"2000 Accounts Payable", "2100 VAT Payable", "2300 Accrued Liabilities", "4000 Sales Revenue",
	"4100 Service Revenue", "5000 Cost of Goods Sold", "6100 Rent Expense", "6200 Salaries Expense",
	"6300 Utilities Expense", "6400 Marketing Expense"}

func genJournalImbalance(r *Rand, _ int) (Built, string) {
	year, month := r.Range(2022, 2025), r.Range(1, 12)
	type row struct {
		entry, account string
		day            int
		debit, credit  int64
		memo           string
	}
	memos := []string{"monthly rent", "supplier invoice", "customer payment", "payroll run", "equipment purchase",
		"utility bill", "sales on account", "inventory receipt", "ad campaign", "accrual"}
	nEntries := r.Range(12, 17)
	firstID := r.Range(100, 900)
	bad, split := r.IntN(nEntries), r.IntN(nEntries)
	for split == bad {
		split = r.IntN(nEntries)
	}
	days := make([]int, nEntries)
	for i := range days {
		days[i] = r.Range(1, 28)
	}
	sort.Ints(days)
	var rows, tail []row
	var badID, splitID string
	for e := range nEntries {
		id := fmt.Sprintf("JE-%d-%04d", year, firstID+e)
		day, memo := days[e], Pick(r, memos)
		accts := Sample(r, ledgerAccounts, r.Range(2, 4))
		nDebit := r.Range(1, len(accts)-1)
		var entryRows []row
		var sum int64
		for i, a := range accts[:nDebit] {
			amt := int64(r.Range(5000, 2500000))
			if i == 0 && e == bad {
				amt = int64(r.Range(100000, 2500000))
			}
			sum += amt
			entryRows = append(entryRows, row{entry: id, account: a, day: day, debit: amt, memo: memo})
		}
		credits := accts[nDebit:]
		left := sum
		for i, a := range credits {
			amt := left
			if i < len(credits)-1 {
				amt = left * int64(r.Range(20, 70)) / 100
			}
			left -= amt
			entryRows = append(entryRows, row{entry: id, account: a, day: day, credit: amt, memo: memo})
		}
		if e == bad {
			badID = id
			entryRows[0].debit = transposeDigits(r, entryRows[0].debit)
		}
		if e == split {
			splitID = id
			tail = append(tail, entryRows[len(entryRows)-1])
			entryRows = entryRows[:len(entryRows)-1]
		}
		rows = append(rows, entryRows...)
	}
	rows = append(rows, tail...) // a late posting of one entry's last line
	var b strings.Builder
	b.WriteString("entry_id,date,account,debit,credit,memo\n")
	for _, x := range rows {
		d, c := "", ""
		if x.debit > 0 {
			d = money(x.debit)
		}
		if x.credit > 0 {
			c = money(x.credit)
		}
		fmt.Fprintf(&b, "%s,%04d-%02d-%02d,%s,%s,%s,%s\n", x.entry, year, month, x.day, x.account, d, c, x.memo)
	}
	return Built{
		Instruction: "journal.csv holds a month of general-journal lines; the lines of one entry share an " +
			"entry_id (not every line sits next to the rest of its entry). Every entry should balance: its " +
			"debits should add up to its credits. Exactly one entry does not. Answer with its entry_id (case is " +
			"ignored).",
		Files: map[string]string{"journal.csv": b.String()},
		Key:   Key{Answer: badID},
	}, splitID
}

func genARAging(r *Rand, _ int) (Built, string) {
	threshold := Pick(r, []int{30, 45, 60, 90})
	asOf := time.Date(r.Range(2022, 2025), time.Month(r.Range(3, 12)), r.Range(1, 28), 0, 0, 0, 0, time.UTC)
	customers := Sample(r, []string{"Brightside Dental", "Copperleaf Hotels", "Delta Outdoor", "Evergreen Clinics",
		"Foxglove Media", "Gulfstream Marine", "Hillcrest Schools", "Ironbridge Labs", "Juniper Foods",
		"Keystone Builders"}, 6)
	var b strings.Builder
	b.WriteString("invoice,customer,issue_date,terms_days,amount,paid\n")
	var total, boundary int64
	n := r.Range(22, 30)
	boundaryAt := r.IntN(n)
	for i := range n {
		terms := Pick(r, []int{15, 30, 30, 45, 60})
		overdue := r.Range(-40, threshold+80)
		if i == boundaryAt {
			overdue = threshold // exactly at the threshold: not "more than"
		}
		issue := asOf.AddDate(0, 0, -(terms + overdue))
		amount := int64(r.Range(15000, 2000000))
		var paid int64
		switch r.IntN(4) {
		case 0:
			paid = amount
		case 1:
			paid = amount * int64(r.Range(10, 80)) / 100
		}
		if i == boundaryAt {
			paid = 0
		}
		if overdue > threshold {
			total += amount - paid
		}
		if overdue == threshold {
			boundary += amount - paid
		}
		fmt.Fprintf(&b, "INV-%d,%s,%s,%d,%s,%s\n", 5000+i*4+r.IntN(3), Pick(r, customers), ymd(issue), terms,
			money(amount), money(paid))
	}
	return Built{
		Instruction: fmt.Sprintf("invoices.csv lists customer invoices with the amount already paid on each. An "+
			"invoice is due terms_days after its issue_date. As of %s, what is the total still owed (amount "+
			"minus paid) on invoices more than %d days past their due date? Answer with the number to 2 "+
			"decimals (within 0.01 counts).", ymd(asOf), threshold),
		Files: map[string]string{"invoices.csv": b.String()},
		Key:   Key{Answer: money(total), Tolerance: 0.01},
	}, money(total + boundary)
}
