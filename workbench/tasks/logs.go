package tasks

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// logFamilies are log-forensics tasks: web access logs, application logs of
// several instances, JSON request logs, SSH auth logs and trace logs.
func logFamilies() []Family {
	return []Family{
		{
			Domain:  "logs",
			Name:    "failed_requests",
			Kind:    KindSet,
			Summary: "list the request ids an access log shows failing with a 5xx status",
			Build:   buildFailedRequests,
		},
		{
			Domain:  "logs",
			Name:    "first_error",
			Kind:    KindText,
			Summary: "find the error code of the earliest ERROR across two instances' logs in different time zones",
			Build:   buildFirstError,
		},
		{
			Domain:  "logs",
			Name:    "error_count",
			Kind:    KindNumber,
			Summary: "count one service's ERROR entries in a time window of a syslog-style log",
			Build:   buildErrorCount,
		},
		{
			Domain:  "logs",
			Name:    "latency_p95",
			Kind:    KindNumber,
			Summary: "compute the nearest-rank p95 latency of one endpoint from JSON request logs",
			Build:   buildLatencyP95,
		},
		{
			Domain:  "logs",
			Name:    "top_ips",
			Kind:    KindList,
			Summary: "rank the three client IPs with the most requests in an access log",
			Build:   buildTopIPs,
		},
		{
			Domain:  "logs",
			Name:    "brute_force_ips",
			Kind:    KindSet,
			Summary: "find the source IPs with five or more failed SSH logins in an auth log",
			Build:   buildBruteForceIPs,
		},
		{
			Domain:  "logs",
			Name:    "trace_path",
			Kind:    KindList,
			Summary: "order the services one trace passed through, from three services' logs",
			Build:   buildTracePath,
		},
	}
}

// accessEntry is one request of a generated access log.
type accessEntry struct {
	ip, method, path, rid string
	at                    time.Time
	status, size          int
}

// line renders e in the combined log format, with the request id last.
func (e accessEntry) line(r *Rand) string {
	ua := Pick(r, []string{"Mozilla/5.0 (X11; Linux x86_64)", "curl/8.5.0", "python-requests/2.31",
		"Mozilla/5.0 (Macintosh; Intel Mac OS X 14_4)", "k6/0.49"})
	return fmt.Sprintf("%s - - [%s] \"%s %s HTTP/1.1\" %d %d \"-\" \"%s\" %s",
		e.ip, e.at.Format("02/Jan/2006:15:04:05 -0700"), e.method, e.path, e.status, e.size, ua, e.rid)
}

var logPaths = []string{"/api/orders", "/api/orders/17", "/api/users/me", "/api/cart", "/api/checkout",
	"/healthz", "/static/app.js", "/api/search?q=lamp", "/login", "/api/invoices/2024-03"}

// randomIP returns an address in one of the documentation and private ranges.
func randomIP(r *Rand) string {
	switch r.IntN(3) {
	case 0:
		return fmt.Sprintf("203.0.113.%d", r.Range(2, 254))
	case 1:
		return fmt.Sprintf("198.51.100.%d", r.Range(2, 254))
	}
	return fmt.Sprintf("10.%d.%d.%d", r.Range(0, 20), r.Range(0, 255), r.Range(2, 254))
}

// logStart is the first timestamp of a variant's logs.
func logStart(r *Rand) time.Time {
	return time.Date(2024, time.Month(r.Range(1, 12)), r.Range(1, 28), r.Range(0, 21), r.Range(0, 59), r.Range(0, 59), 0, time.UTC)
}

func buildFailedRequests(r *Rand, _ int) Built {
	at := logStart(r)
	var lines, want []string
	n := r.Range(35, 50)
	failing := map[int]bool{}
	for k := r.Range(3, 6); len(failing) < k; {
		failing[r.IntN(n)] = true
	}
	// At least one client error and one body size that reads like a 5xx.
	clientErr, sizeTrap := r.IntN(n), r.IntN(n)
	for failing[clientErr] {
		clientErr = (clientErr + 1) % n
	}
	for failing[sizeTrap] || sizeTrap == clientErr {
		sizeTrap = (sizeTrap + 1) % n
	}
	for i := range n {
		at = at.Add(time.Duration(r.Range(1, 40)) * time.Second)
		e := accessEntry{ip: randomIP(r), method: Pick(r, []string{"GET", "GET", "GET", "POST", "PUT"}),
			path: Pick(r, logPaths), at: at, status: Pick(r, []int{200, 200, 200, 201, 204, 301, 304}),
			size: r.Range(120, 9000), rid: fmt.Sprintf("req-%06x", r.IntN(1<<24))}
		switch {
		case failing[i]:
			e.status = Pick(r, []int{500, 502, 503, 504})
			want = append(want, e.rid)
		case i == clientErr || r.Chance(0.12):
			e.status = Pick(r, []int{400, 401, 403, 404, 429})
		case i == sizeTrap || r.Chance(0.1):
			e.size = Pick(r, []int{500, 502, 503}) // a body size that looks like a status
		}
		lines = append(lines, e.line(r))
	}
	sort.Strings(want)
	return Built{
		Instruction: "access.log is a web server's access log in the combined format; the last field of " +
			"each line is the request id. Which requests failed with a server error (HTTP status 500-599)? " +
			"Answer with their request ids, separated by commas (order does not matter; credit is the " +
			"fraction found, reduced for extra ids).",
		Files: map[string]string{"access.log": strings.Join(lines, "\n") + "\n"},
		Key:   Key{Items: want},
	}
}

func buildFirstError(r *Rand, _ int) Built {
	zone := time.FixedZone("", Pick(r, []int{2, 3, 5, -4, -7})*3600)
	start := logStart(r)
	msgs := []string{"request handled", "cache refreshed", "connection pool at %d%%", "job %d queued",
		"heartbeat ok", "config reloaded", "retrying upstream (attempt %d)"}
	errs := []string{"database timeout after %dms", "upstream returned 502 for /api/cart", "disk quota exceeded on /var/lib/app",
		"payment provider rejected request %d", "TLS handshake failed with ledger.internal", "worker %d crashed"}
	type entry struct {
		at   time.Time
		line string
	}
	codeOf := func() string { return fmt.Sprintf("E%04d", r.Range(1000, 9999)) }
	gen := func(file string, tz *time.Location, errorsAt []time.Duration) []entry {
		var out []entry
		at := start
		for i := 0; i < 40; i++ {
			at = at.Add(time.Duration(r.Range(5, 90)) * time.Second)
			level := Pick(r, []string{"INFO", "INFO", "INFO", "DEBUG", "WARN"})
			msg := fillNumber(Pick(r, msgs), r.Range(2, 99))
			if level == "WARN" && r.Chance(0.5) {
				msg = "previous error cleared, code " + codeOf()
			}
			out = append(out, entry{at, fmt.Sprintf("%s %-5s [%s] %s", at.In(tz).Format("2006-01-02T15:04:05.000Z07:00"), level, file, msg)})
		}
		for _, d := range errorsAt {
			at := start.Add(d)
			out = append(out, entry{at, fmt.Sprintf("%s ERROR [%s] %s code=%s", at.In(tz).Format("2006-01-02T15:04:05.000Z07:00"),
				file, fillNumber(Pick(r, errs), r.Range(100, 9999)), codeOf())})
		}
		sort.SliceStable(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
		return out
	}
	// Instance b (local time) logs the earliest error; instance a (UTC) has
	// its first error earlier in wall-clock digits only when b's zone is east
	// of UTC, so reading the times as text misleads in either direction.
	first := time.Duration(r.Range(300, 1500)) * time.Second
	gapA := time.Duration(r.Range(60, 600)) * time.Second
	utcName, localName := "api-a", "api-b"
	if r.Chance(0.5) { // which instance runs in local time varies too
		utcName, localName = localName, utcName
	}
	a := gen(utcName, time.UTC, []time.Duration{first + gapA, first + gapA + time.Duration(r.Range(60, 900))*time.Second})
	b := gen(localName, zone, []time.Duration{first, first + time.Duration(r.Range(900, 1800))*time.Second})
	var answer string
	for _, e := range b {
		if strings.Contains(e.line, " ERROR ") {
			_, answer, _ = strings.Cut(e.line, "code=")
			break
		}
	}
	join := func(es []entry) string {
		var sb strings.Builder
		for _, e := range es {
			sb.WriteString(e.line + "\n")
		}
		return sb.String()
	}
	files := map[string]string{utcName + ".log": join(a), localName + ".log": join(b)}
	return Built{
		Instruction: "api-a.log and api-b.log are the logs of two instances of one service. Each line starts " +
			"with a timestamp that carries its own UTC offset (the instances run in different time zones). " +
			"Which error code (the code=... value) belongs to the earliest ERROR entry across both files, " +
			"in real time? Answer with the code, e.g. E1234.",
		Files: files,
		Key:   Key{Answer: answer},
	}
}

func buildErrorCount(r *Rand, _ int) Built {
	services := Sample(r, []string{"billing", "auth", "mailer", "scheduler", "search", "gateway"}, 4)
	target := services[0]
	host := Pick(r, []string{"web-01", "web-02", "app-3", "node-7"})
	start := logStart(r).Truncate(time.Hour)
	from := start.Add(time.Duration(r.Range(1, 3)) * time.Hour)
	to := from.Add(time.Duration(Pick(r, []int{15, 20, 30, 45})) * time.Minute)
	var b strings.Builder
	count := 0
	// Draw until the window holds the target's errors, other services'
	// errors and a target INFO line that only mentions the word ERROR.
	for decoy, others := false, false; count == 0 || !decoy || !others; {
		b.Reset()
		count, decoy, others = 0, false, false
		for at := from.Add(-20 * time.Minute); at.Before(to.Add(20 * time.Minute)); {
			at = at.Add(time.Duration(r.Range(5, 50)) * time.Second)
			svc := Pick(r, services)
			level := Pick(r, []string{"INFO", "INFO", "WARNING", "ERROR", "ERROR"})
			msg := map[string]string{"INFO": "processed batch", "WARNING": "slow response from dependency",
				"ERROR": "failed to process message"}[level]
			if level == "INFO" && r.Chance(0.3) {
				msg = "recovered from ERROR state" // the word, but not the level
			}
			if in := !at.Before(from) && at.Before(to); in {
				switch {
				case svc == target && level == "ERROR":
					count++
				case svc == target && level == "INFO" && strings.Contains(msg, "ERROR"):
					decoy = true
				case level == "ERROR":
					others = true
				}
			}
			fmt.Fprintf(&b, "%s %s %s[%d]: %s %s id=%d\n", at.Format("2006-01-02T15:04:05Z"), host, svc,
				1000+indexOf(services, svc)*37, level, msg, r.Range(10000, 99999))
		}
	}
	return Built{
		Instruction: fmt.Sprintf("app.log is a syslog-style log (timestamp, host, service[pid]:, level, "+
			"message). How many entries with level ERROR did the %q service log from %s (included) to %s "+
			"(excluded), UTC? Answer with a whole number (it must be exact).", target,
			from.Format("2006-01-02 15:04:05"), to.Format("2006-01-02 15:04:05")),
		Files: map[string]string{"app.log": b.String()},
		Key:   Key{Answer: fmt.Sprint(count)},
	}
}

// fillNumber puts n into a message template that may have one %d.
func fillNumber(template string, n int) string {
	if strings.Contains(template, "%d") {
		return fmt.Sprintf(template, n)
	}
	return template
}

// nearestRank returns the p-th percentile of xs by the nearest-rank method.
func nearestRank(xs []int, p int) int {
	s := append([]int(nil), xs...)
	sort.Ints(s)
	rank := (p*len(s) + 99) / 100
	return s[max(rank, 1)-1]
}

func buildLatencyP95(r *Rand, _ int) Built {
	endpoints := Sample(r, []string{"GET /api/orders", "POST /api/checkout", "GET /api/search", "GET /api/users/:id", "PUT /api/cart"}, 3)
	target := endpoints[0]
	for {
		at := logStart(r)
		var b strings.Builder
		var mine, all []int
		for range r.Range(60, 90) {
			at = at.Add(time.Duration(r.Range(100, 4000)) * time.Millisecond)
			ep := Pick(r, endpoints)
			method, path, _ := strings.Cut(ep, " ")
			ms := r.Range(8, 180)
			if r.Chance(0.08) {
				ms = r.Range(400, 2500) // the slow tail
			}
			if ep == target {
				mine = append(mine, ms)
			}
			all = append(all, ms)
			fmt.Fprintf(&b, "{\"ts\":%q,\"method\":%q,\"route\":%q,\"status\":%d,\"latency_ms\":%d}\n",
				at.Format("2006-01-02T15:04:05.000Z"), method, path, Pick(r, []int{200, 200, 200, 201, 404, 500}), ms)
		}
		want := nearestRank(mine, 95)
		if len(mine) < 15 || nearestRank(all, 95) == want || interpolatedP95(mine) == float64(want) {
			continue
		}
		return Built{
			Instruction: fmt.Sprintf("requests.jsonl has one JSON object per request. What is the 95th "+
				"percentile of latency_ms for %s requests (route %q with method %q, every status), by the "+
				"nearest-rank method (sort ascending, take the value at rank ceil(0.95 x n))? Answer with "+
				"the number of milliseconds (it must be exact).", target, strings.SplitN(target, " ", 2)[1],
				strings.SplitN(target, " ", 2)[0]),
			Files: map[string]string{"requests.jsonl": b.String()},
			Key:   Key{Answer: fmt.Sprint(want)},
		}
	}
}

// interpolatedP95 is the linear-interpolation percentile (numpy's default),
// the plausible mistake the nearest-rank instruction guards against.
func interpolatedP95(xs []int) float64 {
	s := append([]int(nil), xs...)
	sort.Ints(s)
	pos := 0.95 * float64(len(s)-1)
	lo := int(pos)
	if lo+1 >= len(s) {
		return float64(s[lo])
	}
	return float64(s[lo]) + (pos-float64(lo))*float64(s[lo+1]-s[lo])
}

func buildTopIPs(r *Rand, _ int) Built {
	for {
		pool := make([]string, 8)
		for i := range pool {
			pool[i] = randomIP(r)
		}
		weights := []int{9, 7, 6, 5, 4, 3, 2, 2}
		var bag []string
		for i, ip := range pool {
			for range weights[i] {
				bag = append(bag, ip)
			}
		}
		at := logStart(r)
		counts := map[string]int{}
		var lines []string
		for range r.Range(50, 70) {
			at = at.Add(time.Duration(r.Range(1, 30)) * time.Second)
			e := accessEntry{ip: Pick(r, bag), method: "GET", path: Pick(r, logPaths), at: at,
				status: Pick(r, []int{200, 200, 304, 404}), size: r.Range(100, 5000), rid: fmt.Sprintf("req-%06x", r.IntN(1<<24))}
			counts[e.ip]++
			lines = append(lines, e.line(r))
		}
		ranked := rankDesc(counts)
		if len(ranked) < 4 || counts[ranked[0]] == counts[ranked[1]] || counts[ranked[1]] == counts[ranked[2]] ||
			counts[ranked[2]] == counts[ranked[3]] {
			continue
		}
		return Built{
			Instruction: "access.log is a web server's access log in the combined format (the client IP is " +
				"the first field). Which three client IPs sent the most requests? Answer with the three " +
				"addresses, most requests first, separated by commas (order matters; each position is scored).",
			Files: map[string]string{"access.log": strings.Join(lines, "\n") + "\n"},
			Key:   Key{Items: ranked[:3]},
		}
	}
}

func buildBruteForceIPs(r *Rand, _ int) Built {
	const threshold = 5
	users := []string{"root", "admin", "deploy", "ubuntu", "git", "postgres", "alice", "bob", "oracle", "test"}
	failures := map[string]int{}
	type event struct {
		ip      string
		success bool
	}
	var events []event
	used := map[string]bool{}
	freshIP := func() string {
		for {
			if ip := randomIP(r); !used[ip] {
				used[ip] = true
				return ip
			}
		}
	}
	for range r.Range(3, 5) {
		ip := freshIP()
		for range r.Range(threshold, threshold+8) {
			events = append(events, event{ip, false})
		}
	}
	for range r.Range(3, 5) { // near misses: one short of the threshold, some then log in
		ip := freshIP()
		for range threshold - 1 {
			events = append(events, event{ip, false})
		}
		if r.Chance(0.6) {
			events = append(events, event{ip, true})
		}
	}
	for range r.Range(8, 14) {
		events = append(events, event{randomIP(r), true})
	}
	Shuffle(r, events)
	at := logStart(r)
	host := Pick(r, []string{"bastion", "gw-1", "db-02"})
	var b strings.Builder
	for i, e := range events {
		at = at.Add(time.Duration(r.Range(1, 120)) * time.Second)
		stamp := at.Format("Jan _2 15:04:05")
		pid := 20000 + i*3
		port := r.Range(30000, 65000)
		user := Pick(r, users)
		switch {
		case e.success:
			fmt.Fprintf(&b, "%s %s sshd[%d]: Accepted publickey for %s from %s port %d ssh2\n", stamp, host, pid, user, e.ip, port)
		case r.Chance(0.4):
			fmt.Fprintf(&b, "%s %s sshd[%d]: Failed password for invalid user %s from %s port %d ssh2\n", stamp, host, pid, user, e.ip, port)
		default:
			fmt.Fprintf(&b, "%s %s sshd[%d]: Failed password for %s from %s port %d ssh2\n", stamp, host, pid, user, e.ip, port)
		}
		if !e.success {
			failures[e.ip]++
		}
		if r.Chance(0.2) {
			fmt.Fprintf(&b, "%s %s sshd[%d]: Connection closed by %s port %d [preauth]\n", stamp, host, pid, e.ip, port)
		}
	}
	var want []string
	for ip, n := range failures {
		if n >= threshold {
			want = append(want, ip)
		}
	}
	sort.Strings(want)
	return Built{
		Instruction: fmt.Sprintf("auth.log is an SSH server's auth log. Which source IP addresses have %d or "+
			"more failed password attempts (\"Failed password\" lines, invalid users included)? Answer with "+
			"the addresses, separated by commas (order does not matter; credit is the fraction found, "+
			"reduced for extra addresses).", threshold),
		Files: map[string]string{"auth.log": b.String()},
		Key:   Key{Items: want},
	}
}

func buildTracePath(r *Rand, _ int) Built {
	services := []string{"gateway", "orders", "inventory", "payments", "notifier"}
	traceID := func() string { return fmt.Sprintf("%016x", r.Uint64()) }
	target := traceID()
	// The target's path: the gateway first, then the others in a variant's order.
	rest := Sample(r, services[1:], r.Range(3, 4))
	path := append([]string{"gateway"}, rest...)
	start := logStart(r)
	type entry struct {
		at   time.Time
		line string
	}
	perService := map[string][]entry{}
	add := func(svc string, at time.Time, trace, msg string) {
		perService[svc] = append(perService[svc], entry{at, fmt.Sprintf("%s trace=%s span=%08x %s",
			at.Format("2006-01-02T15:04:05.000000Z"), trace, r.Uint64()>>32, msg)})
	}
	// Other traces, interleaved.
	for range r.Range(12, 18) {
		id := traceID()
		at := start.Add(time.Duration(r.Range(0, 4000)) * time.Millisecond)
		for _, svc := range Sample(r, services, r.Range(2, 5)) {
			at = at.Add(time.Duration(r.Range(1, 400)) * time.Millisecond)
			add(svc, at, id, "handled "+Pick(r, []string{"GET /api/orders", "POST /api/checkout", "GET /api/stock"}))
		}
	}
	at := start.Add(time.Duration(r.Range(500, 2500)) * time.Millisecond)
	for i, svc := range path {
		at = at.Add(time.Duration(r.Range(2, 90)) * time.Millisecond)
		add(svc, at, target, "received request")
		if i > 0 && r.Chance(0.5) { // a later line of an earlier hop
			add(path[i-1], at.Add(time.Duration(r.Range(1, 3))*time.Millisecond), target, "awaiting downstream")
		}
	}
	files := map[string]string{}
	for _, svc := range services {
		es := perService[svc]
		sort.SliceStable(es, func(i, j int) bool { return es[i].at.Before(es[j].at) })
		var b strings.Builder
		for _, e := range es {
			b.WriteString(e.line + "\n")
		}
		files["logs/"+svc+".log"] = b.String()
	}
	return Built{
		Instruction: fmt.Sprintf("logs/ holds one log per service; every line carries a trace id. In which "+
			"order did trace %s reach the services? Order the services by the timestamp of their first "+
			"line for that trace and answer with the service names (the log file names without .log), "+
			"separated by commas (order matters; each position is scored).", target),
		Files: files,
		Key:   Key{Items: path},
	}
}
