package tasks

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// documentTraps are the documents domain's families.
var documentTraps = []trapFamily{
	{"meeting_actions", KindSet, "list who got action items at one meeting in a file of minutes", genMeetingActions},
	{"contract_value", KindNumber, "total a contract's fees from its prose and an amendment", genContractValue},
	{"changelog_breaking", KindSet, "find the releases in a range that made breaking changes", genChangelogBreaking},
	{"team_table", KindText, "look up a person in a markdown table by team, role and date", genTeamTable},
	{"milestone_order", KindList, "order a report's milestones by their dates in mixed formats", genMilestoneOrder},
	{"undefined_acronyms", KindSet, "find acronyms a design document never defines", genUndefinedAcronyms},
	{"requirements_count", KindNumber, "count a section's mandatory requirements that are not withdrawn", genRequirementsCount},
}

// documentFamilies are tasks that extract facts from prose, tables and notes.
func documentFamilies() []Family { return trapFamilies("documents", documentTraps) }

func genMeetingActions(r *Rand, _ int) (Built, string) {
	staff := people(r, 9)
	tasks := []string{"draft the Q%d hiring plan", "book the venue for the offsite", "send the vendor shortlist",
		"update the runbook for the billing service", "review the data-retention policy", "set up the demo environment",
		"collect feedback from the pilot customers", "write the migration checklist", "renew the TLS certificates",
		"prepare the budget summary", "schedule the security training", "clean up the staging database",
		"publish the release notes", "interview the two design candidates"}
	topics := []string{"the roadmap", "customer escalations", "the hiring pipeline", "the office move",
		"the incident review", "the budget", "the pilot results", "vendor contracts"}
	start := time.Date(r.Range(2022, 2025), time.Month(r.Range(1, 10)), r.Range(1, 7), 0, 0, 0, 0, time.UTC)
	nMeetings := r.Range(3, 4)
	target := r.IntN(nMeetings)
	var b strings.Builder
	b.WriteString("# Team meeting minutes\n\n")
	var want []string
	all := map[string]bool{}
	var allOrder []string
	for m := range nMeetings {
		date := start.AddDate(0, 0, 7*m)
		attendees := Sample(r, staff, r.Range(5, 7))
		fmt.Fprintf(&b, "## %s — %s\n\n", Pick(r, []string{"Weekly sync", "Team meeting", "Planning"}), ymd(date))
		fmt.Fprintf(&b, "Attendees: %s\n\n### Notes\n\n", strings.Join(attendees, ", "))
		for _, topic := range Sample(r, topics, 2) {
			who := Pick(r, attendees)
			fmt.Fprintf(&b, "- %s summarised %s; %s\n", who, topic,
				Pick(r, []string{"no decision yet.", "the group agreed to revisit it next week.",
					"questions went to the mailing list."}))
		}
		mention := Pick(r, attendees)
		fmt.Fprintf(&b, "- %s offered to help if needed, but took nothing on.\n\n### Action items\n\n", mention)
		candidates := attendees
		if m == target { // the person who only offered to help gets no action here
			candidates = nil
			for _, a := range attendees {
				if a != mention {
					candidates = append(candidates, a)
				}
			}
		}
		owners := Sample(r, candidates, r.Range(2, 3))
		for _, o := range owners {
			task := Pick(r, tasks)
			if strings.Contains(task, "%d") {
				task = fmt.Sprintf(task, r.Range(1, 4))
			}
			fmt.Fprintf(&b, "- [ ] **%s**: %s (due %s)\n", o, task, ymd(date.AddDate(0, 0, r.Range(3, 14))))
			if m == target {
				want = append(want, o)
			}
			if !all[o] {
				all[o] = true
				allOrder = append(allOrder, o)
			}
		}
		b.WriteString("\n")
	}
	// Make sure the union over all meetings is more than the target's set.
	for _, p := range staff {
		if len(allOrder) > len(want) {
			break
		}
		if !all[p] {
			allOrder = append(allOrder, p)
		}
	}
	date := start.AddDate(0, 0, 7*target)
	return Built{
		Instruction: fmt.Sprintf("minutes.md holds the minutes of several team meetings. Who was given an action "+
			"item at the meeting held on %s? Answer with their full names, comma-separated, in any order.", ymd(date)),
		Files: map[string]string{"minutes.md": b.String()},
		Key:   Key{Items: want},
	}, strings.Join(allOrder, ", ")
}

var numberWords = []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
	"eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty",
	"twenty-one", "twenty-two", "twenty-three", "twenty-four", "twenty-five", "twenty-six", "twenty-seven",
	"twenty-eight", "twenty-nine", "thirty", "thirty-one", "thirty-two", "thirty-three", "thirty-four",
	"thirty-five", "thirty-six"}

// grouped renders whole currency units with thousands separators.
func grouped(n int64) string {
	s := fmt.Sprint(n)
	var out []string
	for len(s) > 3 {
		out = append([]string{s[len(s)-3:]}, out...)
		s = s[:len(s)-3]
	}
	return strings.Join(append([]string{s}, out...), ",")
}

func genContractValue(r *Rand, _ int) (Built, string) {
	cur := Pick(r, []string{"USD", "EUR", "GBP"})
	supplier := Pick(r, vendorNames)
	client := Pick(r, []string{"Brightside Dental Group", "Copperleaf Hotels plc", "Hillcrest Schools Trust",
		"Ironbridge Labs Inc.", "Juniper Foods GmbH"})
	term := Pick(r, []int{12, 18, 24, 30, 36})
	fee := int64(r.Range(20, 180)) * 250
	setup := int64(r.Range(4, 40)) * 500
	from := r.Range(4, term-2)
	newFee := fee + int64(r.Range(-8, 12)*250)
	if newFee == fee {
		newFee += 500
	}
	exitMonths := r.Range(2, 4)
	startDate := time.Date(r.Range(2023, 2025), time.Month(r.Range(1, 12)), 1, 0, 0, 0, 0, time.UTC)
	var b strings.Builder
	fmt.Fprintf(&b, "# Master Services Agreement\n\nThis agreement is made between %s (the \"Supplier\") and %s "+
		"(the \"Client\") and takes effect on %s.\n\n", supplier, client, startDate.Format("2 January 2006"))
	fmt.Fprintf(&b, "## 1. Term\n\nThe agreement runs for %s (%d) months from the effective date, after which it "+
		"ends unless renewed in writing.\n\n", numberWords[term], term)
	fmt.Fprintf(&b, "## 2. Fees\n\n2.1 The Client pays a one-time onboarding fee of %s %s, invoiced on the "+
		"effective date.\n\n2.2 The Client pays a monthly service fee of %s %s for each month of the term.\n\n"+
		"2.3 Travel expenses are reimbursed at cost and are not part of the fees.\n\n", cur, grouped(setup), cur,
		grouped(fee))
	fmt.Fprintf(&b, "## 3. Termination\n\nEither party may terminate early with ninety days' notice; the Client "+
		"then owes an early-termination fee equal to %s months of service fees. No early termination is "+
		"planned.\n\n", numberWords[exitMonths])
	fmt.Fprintf(&b, "## Amendment No. 1\n\nWith effect from month %d of the term (inclusive), clause 2.2 is "+
		"replaced: the monthly service fee becomes %s %s. All other terms are unchanged.\n", from, cur, grouped(newFee))
	total := setup + fee*int64(from-1) + newFee*int64(term-from+1)
	return Built{
		Instruction: "contract.md is a services agreement with one amendment. If it runs its full term, what is the " +
			"total the Client pays in fees (the onboarding fee plus every monthly service fee, as amended; no " +
			"expenses, no termination fee)? Answer with the number in the contract's currency, without the " +
			"currency code (within 0.01 counts).",
		Files: map[string]string{"contract.md": b.String()},
		Key:   Key{Answer: fmt.Sprint(total), Tolerance: 0.01},
	}, fmt.Sprint(setup + fee*int64(term))
}

func genChangelogBreaking(r *Rand, _ int) (Built, string) {
	type release struct {
		version string
		section bool // a "Breaking changes" section
		inline  bool // a "BREAKING:" bullet under Changed
	}
	major, minor, patch := r.Range(1, 4), r.Range(0, 5), 0
	var rels []release
	for range r.Range(12, 16) {
		switch {
		case r.Chance(0.15):
			major, minor, patch = major+1, 0, 0
		case r.Chance(0.5):
			minor, patch = minor+1, 0
		default:
			patch++
		}
		rel := release{version: fmt.Sprintf("%d.%d.%d", major, minor, patch)}
		switch n := r.IntN(10); {
		case n < 1:
			rel.section = true
		case n < 2:
			rel.inline = true
		}
		rels = append(rels, rel)
	}
	lo := r.Range(1, 3)
	hi := len(rels) - r.Range(2, 3)
	// At least one of each notation in range, and a breaking release just
	// outside each end.
	rels[lo+1].section, rels[lo+1].inline = true, false
	rels[hi-1].inline, rels[hi-1].section = true, false
	rels[lo+2].inline, rels[lo+2].section = true, false
	rels[lo-1].section = true
	rels[hi+1].inline = true
	added := []string{"a --dry-run flag to the import command", "support for PostgreSQL 16", "a Prometheus metrics endpoint",
		"retry with backoff for webhook delivery", "CSV export of audit logs", "a dark theme for the dashboard",
		"pagination to the /v1/users endpoint", "an Arabic translation"}
	fixed := []string{"a crash when the config file is empty", "timezone handling in scheduled reports",
		"a memory leak in the cache", "double-counting of retried jobs", "a race in session refresh",
		"wrong totals in the monthly summary"}
	breaking := []string{"the `--legacy-auth` flag is removed", "the `/v1/export` endpoint now requires a token",
		"configuration moves from `app.ini` to `app.toml`", "Python 3.8 is no longer supported",
		"the `timeout` setting is now in seconds, not milliseconds", "the default port changes from 8080 to 8443",
		"the `users.name` column is split into `first_name` and `last_name`"}
	changed := []string{"log lines now include the request id", "the dashboard loads 30% faster",
		"dependencies were updated", "error messages are clearer"}
	date := time.Date(r.Range(2021, 2023), time.Month(r.Range(1, 12)), r.Range(1, 28), 0, 0, 0, 0, time.UTC)
	var sections []string
	for _, rel := range rels {
		date = date.AddDate(0, 0, r.Range(9, 40))
		var b strings.Builder
		fmt.Fprintf(&b, "## [%s] - %s\n\n", rel.version, ymd(date))
		if rel.section {
			fmt.Fprintf(&b, "### Breaking changes\n\n- %s\n\n", Pick(r, breaking))
		}
		if r.Chance(0.6) {
			fmt.Fprintf(&b, "### Added\n\n- %s\n\n", Pick(r, added))
		}
		if rel.inline || r.Chance(0.5) {
			b.WriteString("### Changed\n\n")
			if rel.inline {
				fmt.Fprintf(&b, "- BREAKING: %s\n", Pick(r, breaking))
			}
			fmt.Fprintf(&b, "- %s\n\n", Pick(r, changed))
		}
		two := Sample(r, fixed, 2)
		fmt.Fprintf(&b, "### Fixed\n\n- %s\n- %s\n\n", two[0], two[1])
		sections = append([]string{b.String()}, sections...) // newest first
	}
	var want, mistake []string
	for i := lo; i <= hi; i++ {
		if rels[i].section || rels[i].inline {
			want = append(want, rels[i].version)
		}
		if rels[i].section {
			mistake = append(mistake, rels[i].version)
		}
	}
	return Built{
		Instruction: fmt.Sprintf("CHANGELOG.md is a project's changelog, newest release first. A release made "+
			"breaking changes when it has a \"Breaking changes\" section or a bullet that starts with "+
			"\"BREAKING:\". Which releases from %s to %s, both included, made breaking changes? Answer with "+
			"their version numbers (like 1.2.3), comma-separated, in any order.", rels[lo].version, rels[hi].version),
		Files: map[string]string{"CHANGELOG.md": "# Changelog\n\nAll notable changes to this project are " +
			"documented here. The format follows Keep a Changelog.\n\n" + strings.Join(sections, "")},
		Key: Key{Items: want},
	}, strings.Join(mistake, ", ")
}

func genTeamTable(r *Rand, _ int) (Built, string) {
	teams := Sample(r, []string{"Payments", "Search", "Platform", "Mobile", "Data", "Identity"}, 4)
	target := teams[0]
	roles := []string{"Engineer", "Senior Engineer", "Engineering Manager", "Designer", "Product Manager", "Data Analyst"}
	names := people(r, r.Range(16, 22))
	type member struct {
		name, team, role, loc string
		start                 time.Time
	}
	var ms []member
	base := time.Date(2014, 1, 1, 0, 0, 0, 0, time.UTC)
	used := map[string]bool{}
	for i, n := range names {
		m := member{name: n, team: Pick(r, teams), role: Pick(r, roles),
			loc: Pick(r, []string{"Lisbon", "Remote", "Berlin", "Toronto", "Remote", "Austin"})}
		switch i {
		case 0, 1: // two engineers on the team
			m.team, m.role = target, Pick(r, roles[:2])
		case 2: // a non-engineer on the team who started first
			m.team, m.role = target, Pick(r, roles[2:])
		}
		for {
			m.start = base.AddDate(0, 0, r.IntN(3650))
			if !used[ymd(m.start)] {
				used[ymd(m.start)] = true
				break
			}
		}
		ms = append(ms, m)
	}
	var earliest, earliestAny *member
	for i := range ms {
		m := &ms[i]
		if m.team != target {
			continue
		}
		if (m.role == "Engineer" || m.role == "Senior Engineer") && (earliest == nil || m.start.Before(earliest.start)) {
			earliest = m
		}
	}
	// The non-engineer started before every engineer on the team.
	ms[2].start = earliest.start.AddDate(0, 0, -r.Range(30, 400))
	for i := range ms {
		if ms[i].team == target && (earliestAny == nil || ms[i].start.Before(earliestAny.start)) {
			earliestAny = &ms[i]
		}
	}
	wantName, mistakeName := earliest.name, earliestAny.name
	Shuffle(r, ms)
	var b strings.Builder
	b.WriteString("# Engineering directory\n\nKept up to date by the people team. Start dates are ISO dates.\n\n")
	b.WriteString("| Name | Team | Role | Start date | Location |\n|------|------|------|------------|----------|\n")
	for _, m := range ms {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", m.name, m.team, m.role, ymd(m.start), m.loc)
	}
	return Built{
		Instruction: fmt.Sprintf("team.md has a markdown table of the people in engineering. Among the %s team "+
			"members whose role is exactly \"Engineer\" or \"Senior Engineer\", who has been there longest "+
			"(earliest start date)? Answer with the name as written in the table (case and surrounding spaces "+
			"are ignored).", target),
		Files: map[string]string{"team.md": b.String()},
		Key:   Key{Answer: wantName},
	}, mistakeName
}

func genMilestoneOrder(r *Rand, _ int) (Built, string) {
	names := Sample(r, []string{"Design freeze", "Beta launch", "Security audit", "Load test", "Data migration",
		"General availability", "Vendor sign-off", "Training rollout", "Pilot kickoff", "Legal review"}, r.Range(5, 7))
	year := r.Range(2023, 2026)
	base := time.Date(year, time.Month(r.Range(1, 5)), 1, 0, 0, 0, 0, time.UTC)
	used := map[int]bool{}
	dates := make([]time.Time, len(names))
	for i := range names {
		d := r.Range(0, 200)
		for used[d] {
			d = r.Range(0, 200)
		}
		used[d] = true
		dates[i] = base.AddDate(0, 0, d)
	}
	formats := []func(time.Time) string{
		func(t time.Time) string { return "on " + t.Format("2 January 2006") },
		func(t time.Time) string { return "on " + ymd(t) },
		func(t time.Time) string { return "on " + t.Format("January 2, 2006") },
		func(t time.Time) string { return "on " + t.Format("Mon 2 Jan 2006") },
	}
	sentences := []string{
		"The team expects **%s** to happen %s, assuming no slips.",
		"**%s** was moved and now falls %s.",
		"We agreed with finance that **%s** lands %s.",
		"After the steering call, **%s** is scheduled %s.",
		"**%s** is pencilled in %s; the owner confirmed last week.",
	}
	// The report mentions the milestones in an order that is not
	// chronological.
	order := make([]int, len(names))
	for i := range order {
		order[i] = i
	}
	chrono := func(o []int) bool {
		for i := 1; i < len(o); i++ {
			if dates[o[i]].Before(dates[o[i-1]]) {
				return false
			}
		}
		return true
	}
	for chrono(order) {
		Shuffle(r, order)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Project Lighthouse: status report\n\nPrepared for the steering committee, %s.\n\n## Schedule\n\n",
		base.AddDate(0, 0, -10).Format("2 January 2006"))
	var mentioned []string
	for k, i := range order {
		fmt.Fprintf(&b, sentences[k%len(sentences)]+" ", names[i], Pick(r, formats)(dates[i]))
		if k%2 == 1 {
			b.WriteString("\n\n")
		}
		mentioned = append(mentioned, names[i])
	}
	b.WriteString("\n\n## Risks\n\nStaffing remains tight; no other dates are affected.\n")
	sorted := make([]int, len(names))
	copy(sorted, order)
	sort.SliceStable(sorted, func(a, c int) bool { return dates[sorted[a]].Before(dates[sorted[c]]) })
	var want []string
	for _, i := range sorted {
		want = append(want, names[i])
	}
	return Built{
		Instruction: "report.md is a project status report whose schedule names milestones in bold, each with " +
			"its date. List the milestones in chronological order, earliest first, comma-separated, using the " +
			"names as written in bold.",
		Files: map[string]string{"report.md": b.String()},
		Key:   Key{Items: want},
	}, strings.Join(mentioned, ", ")
}

var acronymDefs = [][2]string{{"SLA", "service level agreement"}, {"RPO", "recovery point objective"},
	{"RTO", "recovery time objective"}, {"SSO", "single sign-on"}, {"CDN", "content delivery network"},
	{"WAF", "web application firewall"}, {"ETL", "extract, transform, load"}, {"KMS", "key management service"},
	{"MFA", "multi-factor authentication"}, {"TTL", "time to live"}, {"VPC", "virtual private cloud"},
	{"SIEM", "security information and event management"}, {"OLAP", "online analytical processing"},
	{"RBAC", "role-based access control"}, {"PII", "personally identifiable information"}}

func genUndefinedAcronyms(r *Rand, _ int) (Built, string) {
	picked := Sample(r, acronymDefs, r.Range(8, 11))
	nUndefined := r.Range(2, 4)
	lateDefined := nUndefined // this one is used before it is defined
	templates := []string{
		"Traffic enters through the %s before it reaches the application tier.",
		"Every change to the %s settings needs a second reviewer.",
		"The %s figures are reported monthly to the steering group.",
		"Nightly jobs copy the data with %s tooling into the warehouse.",
		"Operators must use %s when they open the admin console.",
		"The on-call runbook lists the %s for each tier.",
		"Access to the reporting store follows %s rules agreed with legal.",
	}
	var paras []string
	var want, mistake []string
	for i, a := range picked {
		use := fmt.Sprintf(Pick(r, templates), a[0])
		def := fmt.Sprintf("We rely on %s (%s) for this.", a[1], a[0])
		if r.Chance(0.5) {
			def = fmt.Sprintf("The design adopts %s (%s) throughout.", a[1], a[0])
		}
		switch {
		case i < nUndefined:
			paras = append(paras, use)
			want = append(want, a[0])
			mistake = append(mistake, a[0])
		case i == lateDefined:
			paras = append(paras, use)
			paras = append(paras, "@@LATE@@"+def) // placed after every use
			mistake = append(mistake, a[0])
		default:
			paras = append(paras, def, use)
		}
	}
	var early, late []string
	for _, p := range paras {
		if rest, ok := strings.CutPrefix(p, "@@LATE@@"); ok {
			late = append(late, rest)
		} else {
			early = append(early, p)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Design: %s\n\n## Overview\n\n", Pick(r, []string{"Order history service", "Reporting platform",
		"Customer portal", "Document archive"}))
	for i, p := range early {
		b.WriteString(p)
		if i%3 == 2 {
			b.WriteString("\n\n")
		} else {
			b.WriteString(" ")
		}
	}
	b.WriteString("\n\n## Appendix: glossary notes\n\n")
	b.WriteString(strings.Join(late, " "))
	b.WriteString("\n")
	return Built{
		Instruction: "design.md is a design document. An acronym (a word of 2 to 5 capital letters) is defined " +
			"where it appears in parentheses right after its expansion, like \"domain name system (DNS)\", " +
			"anywhere in the document. Which acronyms does the document use without ever defining them? " +
			"Answer with the acronyms, comma-separated, in any order.",
		Files: map[string]string{"design.md": b.String()},
		Key:   Key{Items: want},
	}, strings.Join(mistake, ", ")
}

func genRequirementsCount(r *Rand, _ int) (Built, string) {
	const deferred = "Deferred to phase 2"
	sections := Sample(r, []string{"Authentication", "Billing", "Reporting", "Notifications", "Data retention",
		"Accessibility"}, 4)
	at := r.IntN(len(sections))
	sections = append(sections[:at], append([]string{deferred}, sections[at:]...)...)
	subjects := []string{"The system", "The service", "The API", "The web client", "Each export", "An administrator"}
	verbs := []string{"log every failed attempt", "retain records for seven years", "send a receipt by email",
		"support keyboard navigation", "expire idle sessions after 15 minutes", "encrypt data at rest",
		"offer CSV and PDF output", "rate-limit requests per client", "show amounts in the user's currency",
		"let users delete their account"}
	var b strings.Builder
	b.WriteString("# Requirements specification\n\nKeywords follow RFC 2119: SHALL and MUST are mandatory, SHOULD " +
		"is recommended, MAY is optional. Withdrawn requirements are struck through and kept for traceability.\n\n")
	next := r.Range(1, 30)
	var want, withWithdrawn int
	planted := false
	for _, sec := range sections {
		fmt.Fprintf(&b, "## %s\n\n", sec)
		for k := range r.Range(5, 11) {
			kw := Pick(r, []string{"SHALL", "MUST", "SHOULD", "MAY", "SHALL"})
			withdrawn := r.Chance(0.15)
			if sec != deferred && !planted && k == 0 {
				kw, withdrawn, planted = "MUST", true, true // a withdrawn mandatory requirement in scope
			}
			text := fmt.Sprintf("REQ-%03d: %s %s %s.", next, Pick(r, subjects), kw, Pick(r, verbs))
			next += r.Range(1, 3)
			if withdrawn {
				text = "~~" + text + "~~ (withdrawn)"
			}
			fmt.Fprintf(&b, "- %s\n", text)
			if sec != deferred && (kw == "SHALL" || kw == "MUST") {
				withWithdrawn++
				if !withdrawn {
					want++
				}
			}
		}
		b.WriteString("\n")
	}
	return Built{
		Instruction: fmt.Sprintf("requirements.md is a requirements specification. How many mandatory "+
			"requirements (SHALL or MUST) does it hold, not counting withdrawn ones nor those in the %q "+
			"section? Answer with the exact count.", deferred),
		Files: map[string]string{"requirements.md": b.String()},
		Key:   Key{Answer: fmt.Sprint(want)},
	}, fmt.Sprint(withWithdrawn)
}
