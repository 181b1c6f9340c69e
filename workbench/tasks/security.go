package tasks

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
)

// securityTraps are the security domain's families. Every credential they
// write is made up from the variant's generator (AKIA or ghp_ followed by
// random characters): it has the shape of a real one and opens nothing.
var securityTraps = []trapFamily{
	{"leaked_secrets", KindSet, "find the lines of a repository that hardcode credentials", genLeakedSecrets},
	{"vulnerable_pins", KindSet, "match pinned dependency versions against an advisory list", genVulnerablePins},
	{"unsafe_permissions", KindSet, "find unsafe modes in an ls -lR listing of a deployment", genUnsafePermissions},
	{"weak_tls", KindSet, "find nginx servers whose TLS protocols or ciphers break a policy", genWeakTLS},
	{"firewall_exposure", KindSet, "find security-group rules that open non-web ports to the internet", genFirewallExposure},
	{"cert_expiry", KindList, "order the certificates that expire within a window", genCertExpiry},
	{"search_injection_fix", KindCode, "fix a product search built by string formatting", genSearchInjectionFix},
}

// securityFamilies are security-review tasks.
func securityFamilies() []Family { return trapFamilies("security", securityTraps) }

const (
	upperDigits = "ABCDEFGHIJKLMNOPQRSTUVWYZ234567" // no X: a run of X marks a placeholder
	alnum       = "abcdefghijklmnopqrstuvwyzABCDEFGHIJKLMNOPQRSTUVWYZ0123456789"
)

// indentJSON renders v as indented JSON with a final newline, leaving <, >
// and & as they are (a config file, not HTML).
func indentJSON(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		panic(fmt.Sprintf("tasks: %v", err))
	}
	return b.String()
}

func randChars(r *Rand, alphabet string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

// srcLine is one line of a generated file: a leak, a decoy or filler.
type srcLine struct {
	text        string
	leak, decoy bool
}

func genLeakedSecrets(r *Rand, _ int) (Built, string) {
	awsKey := func() string { return "AKIA" + randChars(r, upperDigits, 16) }
	type slot struct {
		path       string
		leak, safe string
	}
	slots := []slot{
		{"app/settings.py", fmt.Sprintf("AWS_ACCESS_KEY_ID = %q", awsKey()),
			`AWS_ACCESS_KEY_ID = os.environ["AWS_ACCESS_KEY_ID"]`},
		{"app/settings.py", fmt.Sprintf("STRIPE_SECRET = %q", "sk_live_"+randChars(r, alnum, 24)),
			`STRIPE_SECRET = os.environ.get("STRIPE_SECRET", "")`},
		{"deploy/deploy.sh", "export GITHUB_TOKEN=ghp_" + randChars(r, alnum, 36),
			`export GITHUB_TOKEN="${GITHUB_TOKEN:?set it in CI}"`},
		{"config/app.yaml", fmt.Sprintf("  url: postgres://shop:%s@db.internal:5432/shop", randChars(r, alnum, 14)),
			"  url: postgres://shop:${DB_PASSWORD}@db.internal:5432/shop"},
		{"config/app.yaml", fmt.Sprintf("  slack_token: xoxb-%d-%d-%s", r.Range(100000000, 999999999),
			r.Range(100000000, 999999999), randChars(r, alnum, 24)), "  slack_token: ${SLACK_TOKEN}"},
		{"scripts/backup.py", fmt.Sprintf(`s3 = boto3.client("s3", aws_access_key_id=%q, aws_secret_access_key=%q)`,
			awsKey(), randChars(r, alnum, 40)), `s3 = boto3.client("s3")  # credentials from the instance role`},
		{"deploy/id_ed25519", "-----BEGIN OPENSSH PRIVATE KEY-----", ""},
	}
	idx := Sample(r, []int{0, 1, 2, 3, 4, 5, 6}, r.Range(3, 5))
	isLeak := map[int]bool{}
	for _, i := range idx {
		isLeak[i] = true
	}
	pick := func(i int) srcLine {
		if isLeak[i] {
			return srcLine{text: slots[i].leak, leak: true}
		}
		return srcLine{text: slots[i].safe}
	}
	decoyKey := "AKIA" + strings.Repeat("X", 16)
	files := map[string][]srcLine{
		"app/settings.py": {
			{text: `"""Settings for the shop application."""`}, {text: "import os"}, {text: ""},
			{text: "DEBUG = False"}, {text: `ALLOWED_HOSTS = ["shop.example.com"]`}, pick(0),
			{text: `AWS_REGION = "eu-west-1"`},
			{text: `# For local runs only: AWS_ACCESS_KEY_ID = "AKIAIOSFODNN7EXAMPLE" (the AWS docs' sample)`, decoy: true},
			pick(1), {text: `TIME_ZONE = "UTC"`}, {text: `LOG_LEVEL = "info"`},
		},
		"deploy/deploy.sh": {
			{text: "#!/bin/sh"}, {text: "set -eu"}, pick(2), {text: "cd /srv/shop"},
			{text: `# curl -H "Authorization: token ghp_` + strings.Repeat("x", 36) + `" https://api.github.com/user`, decoy: true},
			{text: "git pull --ff-only"}, {text: "systemctl restart shop"},
		},
		"config/app.yaml": {
			{text: "server:"}, {text: "  port: 8080"}, {text: "  workers: 4"}, {text: "database:"}, pick(3),
			{text: "  pool_size: 10"}, {text: "notifications:"}, {text: "  channel: \"#shop-alerts\""}, pick(4),
		},
		"scripts/backup.py": {
			{text: "import boto3"}, {text: ""}, pick(5), {text: ""}, {text: "def main():"},
			{text: `    s3.upload_file("/var/backups/shop.sql.gz", "shop-backups", "daily/shop.sql.gz")`},
		},
		".env.example": {
			{text: "# Copy to .env and fill in real values"}, {text: "AWS_ACCESS_KEY_ID=" + decoyKey, decoy: true},
			{text: "GITHUB_TOKEN=<your token>"}, {text: "DB_PASSWORD=changeme"}, {text: "SLACK_TOKEN=xoxb-your-token-here"},
		},
		"README.md": {
			{text: "# Shop"}, {text: ""}, {text: "Run `deploy/deploy.sh` from CI. Secrets come from the environment; see"},
			{text: "`.env.example`. Never commit real credentials."},
		},
	}
	if isLeak[6] {
		var lines []srcLine
		lines = append(lines, pick(6))
		for range 5 {
			lines = append(lines, srcLine{text: randChars(r, alnum+"+/", 70)})
		}
		lines = append(lines, srcLine{text: "-----END OPENSSH PRIVATE KEY-----"})
		files["deploy/id_ed25519"] = lines
	}
	// Shuffle the filler order of the YAML-free files a little: move the
	// settings' decoy comment around.
	out := map[string]string{}
	var want, mistake []string
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		var b strings.Builder
		for n, l := range files[p] {
			b.WriteString(l.text + "\n")
			item := fmt.Sprintf("%s:%d", p, n+1)
			if l.leak {
				want = append(want, item)
			}
			if l.leak || l.decoy {
				mistake = append(mistake, item)
			}
		}
		out[p] = b.String()
	}
	return Built{
		Instruction: "This workspace is a snapshot of a small repository. Find every line that hardcodes a " +
			"credential: an AWS access key id (AKIA followed by 16 capital letters or digits), a GitHub token " +
			"(ghp_…), a Slack token (xoxb-…), a Stripe live secret key (sk_live_…), the BEGIN line of a private " +
			"key, or a password written inside a database URL. Placeholders are not credentials: values containing " +
			"EXAMPLE, a run of x or X characters, angle-bracketed text such as <password>, 'changeme', " +
			"'your-token-here', or values taken from the environment (${VAR}, os.environ). Every value here is " +
			"synthetic, but treat it as real. Answer with path:line items (line numbers start at 1), " +
			"comma-separated, in any order, for example app/main.py:3.",
		Files: out,
		Key:   Key{Items: want},
	}, strings.Join(mistake, ", ")
}

// inAffected reports whether version v is in an advisory's affected range
// (comparisons joined by commas), comparing versions with less.
func inAffected(v, affected string, less func(a, b string) bool) bool {
	for _, c := range strings.Split(affected, ",") {
		c = strings.TrimSpace(c)
		switch {
		case strings.HasPrefix(c, ">="):
			if less(v, c[2:]) {
				return false
			}
		case strings.HasPrefix(c, "<"):
			if !less(v, c[1:]) {
				return false
			}
		}
	}
	return true
}

type pyVersion [3]int

func (v pyVersion) String() string { return fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2]) }

func genVulnerablePins(r *Rand, _ int) (Built, string) {
	names := Sample(r, []string{"httpkit", "jsonweave", "yamlet", "pixelforge", "sqlbridge", "authlite",
		"cryptobox", "xmlsift", "taskqueue-py", "templaro", "uploadr", "datebox", "netfetch", "mailmerge-py",
		"cache_flow", "Markupy", "zipstream-ng2", "geo_tools"}, r.Range(12, 15))
	type pin struct {
		name string
		v    pyVersion
	}
	var pins []pin
	for _, n := range names {
		// Single-digit parts, so only the planted 1.1x.y pin tells text
		// comparison from numeric comparison.
		pins = append(pins, pin{n, pyVersion{r.Range(0, 4), r.Range(0, 8), r.Range(0, 6)}})
	}
	type advisory struct {
		ID       string `json:"id"`
		Package  string `json:"package"`
		Affected string `json:"affected"`
		Fixed    string `json:"fixed_in"`
		Summary  string `json:"summary"`
	}
	summaries := []string{"path traversal in archive extraction", "denial of service via crafted input",
		"signature check can be bypassed", "SQL injection in the filter helper", "XML external entity expansion",
		"open redirect in the login flow", "credentials written to debug logs"}
	norm := func(n string) string { return strings.ToLower(strings.ReplaceAll(n, "_", "-")) }
	var advs []advisory
	var want, mistake []string
	year := r.Range(2023, 2025)
	for i, p := range pins {
		vuln := false
		var affected string
		var fixed pyVersion
		switch k := i % 5; {
		case i == 0: // lexical trap: 1.10.x is newer than 1.9.0, but not as text
			p.v = pyVersion{1, r.Range(10, 14), r.Range(0, 5)}
			fixed = pyVersion{1, 9, 0}
			affected = "<" + fixed.String()
		case i == 1: // pinned exactly at the fix
			fixed = p.v
			affected = "<" + fixed.String()
		case k == 2 || i == 2: // vulnerable, simple bound
			fixed = pyVersion{p.v[0], p.v[1], p.v[2] + r.Range(1, 3)}
			affected, vuln = "<"+fixed.String(), true
		case k == 3: // vulnerable inside a range
			lo := pyVersion{p.v[0], 0, 0}
			fixed = pyVersion{p.v[0], p.v[1] + 1, 0}
			affected, vuln = fmt.Sprintf(">=%s,<%s", lo, fixed), true
		case k == 4: // a range that ended before this version
			if p.v[0] == 0 {
				p.v[0] = 1
			}
			fixed = pyVersion{p.v[0] - 1, r.Range(2, 9), 0}
			affected = fmt.Sprintf(">=%d.0.0,<%s", p.v[0]-1, fixed)
		default:
			continue // no advisory
		}
		pins[i] = p
		advs = append(advs, advisory{ID: fmt.Sprintf("ADV-%d-%04d", year, r.Range(1, 9999)), Package: norm(p.name),
			Affected: affected, Fixed: fixed.String(), Summary: Pick(r, summaries)})
		if vuln {
			want = append(want, p.name)
		}
		if inAffected(p.v.String(), affected, func(a, b string) bool { return a < b }) {
			mistake = append(mistake, p.name) // versions compared as text
		}
	}
	Shuffle(r, advs)
	var req strings.Builder
	req.WriteString("# Pinned with pip-compile; do not edit by hand\n")
	order := append([]pin(nil), pins...)
	sort.Slice(order, func(a, b int) bool { return norm(order[a].name) < norm(order[b].name) })
	for _, p := range order {
		line := p.name + "==" + p.v.String()
		if r.Chance(0.2) {
			line += "  # via " + Pick(r, names)
		}
		req.WriteString(line + "\n")
	}
	data := indentJSON(map[string]any{"source": "internal advisory feed (synthetic)", "advisories": advs})
	return Built{
		Instruction: "requirements.txt pins the project's Python dependencies and advisories.json lists security " +
			"advisories. A pinned package is vulnerable when an advisory names it and its pinned version falls " +
			"in the advisory's affected range (comma means and; versions compare numerically part by part). " +
			"Package names compare case-insensitively with - and _ treated alike. Which pinned packages are " +
			"vulnerable? Answer with their names as written in requirements.txt, comma-separated, in any order.",
		Files: map[string]string{"requirements.txt": req.String(), "advisories.json": data},
		Key:   Key{Items: want},
	}, strings.Join(mistake, ", ")
}

func genUnsafePermissions(r *Rand, _ int) (Built, string) {
	root := Pick(r, []string{"/srv/shop", "/opt/billing", "/srv/portal"})
	owner := Pick(r, []string{"app", "deploy", "www"})
	type entry struct {
		mode, name, link string
		size             int
		dir              bool
		bad, trap        bool
	}
	type dirList struct {
		path    string
		entries []entry
	}
	month := Pick(r, []string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"})
	f := func(mode, name string, bad bool) entry {
		return entry{mode: mode, name: name, size: r.Range(120, 90000), bad: bad}
	}
	pickMode := func(good, badMode string, p float64) (string, bool) {
		if r.Chance(p) {
			return badMode, true
		}
		return good, false
	}
	m1, b1 := pickMode("-rw-r--r--", "-rw-rw-rw-", 0.5)
	m2, b2 := pickMode("-rw-------", "-rw-r--r--", 0.6)
	m3, b3 := pickMode("-rw-r-----", "-rw-r--r--", 0.5)
	m4, b4 := pickMode("-rwxr-xr-x", "-rwsr-xr-x", 0.5)
	m5, b5 := pickMode("drwxr-x---", "drwxrwxrwx", 0.4)
	m6, b6 := pickMode("-rw-------", "-rw----rw-", 0.3)
	if !b1 && !b2 && !b3 {
		m2, b2 = "-rw-r--r--", true
	}
	if !b4 && !b5 && !b6 {
		m5, b5 = "drwxrwxrwx", true
	}
	dirs := []dirList{
		{path: root, entries: []entry{
			{mode: "drwxr-xr-x", name: "bin", dir: true}, {mode: "drwxr-xr-x", name: "config", dir: true},
			{mode: "drwxrwxrwt", name: "tmp", dir: true, trap: true}, {mode: m5, name: "uploads", dir: true, bad: b5},
			{mode: "lrwxrwxrwx", name: "current", link: "releases/2024.3", trap: true},
			f("-rw-r--r--", "README.md", false), f(m1, "app.py", b1),
		}},
		{path: root + "/bin", entries: []entry{
			f("-rwxr-xr-x", "start.sh", false), f(m4, "backup-helper", b4),
			f("-rwsr-xr-x", "ping-check", false), // on the allow-list
			{mode: "lrwxrwxrwx", name: "python", link: "/usr/bin/python3", trap: true},
		}},
		{path: root + "/config", entries: []entry{
			f("-rw-r--r--", "settings.toml", false), f(m2, "db.env", b2), f(m3, "tls.pem", b3),
			f(m6, "signing.pem", b6), f("-rw-r--r--", "tls.crt", false),
		}},
		{path: root + "/tmp", entries: []entry{f("-rw-------", "session.lock", false)}},
		{path: root + "/uploads", entries: []entry{f("-rw-r--r--", "avatar-1031.png", false)}},
	}
	var b strings.Builder
	var want, mistake []string
	for i, d := range dirs {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%s:\ntotal %d\n", d.path, r.Range(8, 96))
		self := "drwxr-xr-x"
		for _, parent := range dirs[0].entries {
			if root+"/"+parent.name == d.path {
				self = parent.mode
			}
		}
		fmt.Fprintf(&b, "%s %d %s %s %5d %s %2d %02d:%02d .\n", self, r.Range(2, 6), owner, owner, 4096, month,
			r.Range(1, 28), r.Range(0, 23), r.Range(0, 59))
		for _, e := range d.entries {
			size := e.size
			if e.dir {
				size = 4096
			}
			if e.link != "" {
				size = len(e.link)
			}
			name := e.name
			if e.link != "" {
				name += " -> " + e.link
			}
			user := owner
			if strings.Contains(e.mode, "s") {
				user = "root"
			}
			fmt.Fprintf(&b, "%s %d %s %s %5d %s %2d %02d:%02d %s\n", e.mode, 1+boolInt(e.dir), user, owner, size, month,
				r.Range(1, 28), r.Range(0, 23), r.Range(0, 59), name)
			full := d.path + "/" + e.name
			if e.bad {
				want = append(want, full)
				mistake = append(mistake, full)
			}
			if e.trap {
				mistake = append(mistake, full)
			}
		}
	}
	return Built{
		Instruction: fmt.Sprintf("listing.txt is the output of ls -lR %s on a production host. Flag every entry "+
			"that breaks this policy: (1) nothing may be writable by others, except a directory with the sticky "+
			"bit (t); (2) secret material (*.env and *.pem files) must not be readable or writable by group or "+
			"others; except that *.pem files may be readable by the group; (3) no setuid or setgid file except "+
			"%s/bin/ping-check. A symlink's own mode (always lrwxrwxrwx) does not matter. Answer with the full "+
			"paths of the flagged entries, comma-separated, in any order.", root, root),
		Files: map[string]string{"listing.txt": b.String()},
		Key:   Key{Items: want},
	}, strings.Join(mistake, ", ")
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func genWeakTLS(r *Rand, _ int) (Built, string) {
	strongCiphers := []string{"ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384",
		"HIGH:!aNULL:!MD5:!RC4:!3DES", "ECDHE+AESGCM:ECDHE+CHACHA20:!aNULL:!eNULL:!EXPORT:!DES:!RC4:!MD5",
		"EECDH+AESGCM:EDH+AESGCM:-RC4:-3DES"}
	weakCiphers := []string{"HIGH:MEDIUM:RC4-SHA:!aNULL", "ECDHE-RSA-AES128-GCM-SHA256:DES-CBC3-SHA",
		"ALL:!aNULL:EXPORT", "HIGH:!aNULL:NULL-SHA256", "ECDHE-RSA-AES256-SHA384:RC4-MD5"}
	strongProtos := []string{"TLSv1.2 TLSv1.3", "TLSv1.3", "TLSv1.2"}
	weakProtos := []string{"TLSv1 TLSv1.1 TLSv1.2", "TLSv1.1 TLSv1.2 TLSv1.3", "SSLv3 TLSv1.2"}
	defaultWeak := r.Chance(0.5)
	defProto := Pick(r, strongProtos)
	if defaultWeak {
		defProto = Pick(r, weakProtos)
	}
	defCipher := Pick(r, strongCiphers[1:]) // the default always uses ! exclusions
	var nginx strings.Builder
	fmt.Fprintf(&nginx, "user www-data;\nworker_processes auto;\n\nhttp {\n    sendfile on;\n    ssl_protocols %s;\n"+
		"    ssl_ciphers %s;\n    ssl_prefer_server_ciphers on;\n    include sites/*.conf;\n}\n", defProto, defCipher)
	hosts := Sample(r, []string{"shop", "api", "admin", "status", "static", "auth", "billing", "partners",
		"docs", "legacy", "intranet", "metrics"}, r.Range(6, 8))
	domain := Pick(r, []string{"example.com", "example.org", "example.net"})
	files := map[string]string{"nginx.conf": nginx.String()}
	var want, mistake []string
	// Every variant has a server of each kind: inheriting, weak protocols,
	// weak ciphers, and strong with ! exclusions.
	kinds := make([]int, len(hosts))
	for i := range kinds {
		kinds[i] = r.IntN(5)
		if i < 4 {
			kinds[i] = []int{0, 1, 2, 5}[i]
		}
	}
	Shuffle(r, kinds)
	for i := 0; i < len(hosts); i += 2 {
		var b strings.Builder
		for j, h := range hosts[i:min(i+2, len(hosts))] {
			name := h + "." + domain
			fmt.Fprintf(&b, "server {\n    listen 443 ssl;\n    server_name %s www.%s;\n", name, name)
			fmt.Fprintf(&b, "    ssl_certificate /etc/ssl/%s.crt;\n    ssl_certificate_key /etc/ssl/private/%s.pem;\n", name, name)
			proto, cipher := defProto, defCipher
			bad := false
			switch kinds[i+j] {
			case 0: // inherits both defaults
			case 1:
				proto = Pick(r, weakProtos)
				fmt.Fprintf(&b, "    ssl_protocols %s;\n", proto)
			case 2:
				cipher = Pick(r, weakCiphers)
				fmt.Fprintf(&b, "    ssl_ciphers %s;\n", cipher)
			case 5:
				proto, cipher = Pick(r, strongProtos), Pick(r, strongCiphers[1:])
				fmt.Fprintf(&b, "    ssl_protocols %s;\n    ssl_ciphers %s;\n", proto, cipher)
			default:
				proto, cipher = Pick(r, strongProtos), Pick(r, strongCiphers)
				fmt.Fprintf(&b, "    ssl_protocols %s;\n    ssl_ciphers %s;\n", proto, cipher)
			}
			bad = weakProto(proto) || weakCipher(cipher, false)
			if bad {
				want = append(want, name)
			}
			if bad || weakCipher(cipher, true) {
				mistake = append(mistake, name)
			}
			fmt.Fprintf(&b, "    location / {\n        proxy_pass http://127.0.0.1:%d;\n    }\n}\n\n", r.Range(3000, 9000))
		}
		files[fmt.Sprintf("sites/%02d-%s.conf", i/2+1, hosts[i])] = b.String()
	}
	return Built{
		Instruction: "nginx.conf and sites/*.conf configure nginx; a server block inherits ssl_protocols and " +
			"ssl_ciphers from the http block unless it sets its own. The policy: only TLSv1.2 and TLSv1.3 may be " +
			"enabled, and the cipher string must not enable any cipher whose name contains RC4, DES (3DES and " +
			"DES-CBC3 included), MD5, NULL or EXPORT; an element starting with ! or - excludes ciphers and " +
			"never breaks the policy. Which servers break the policy? Answer with each server's first " +
			"server_name, comma-separated, in any order.",
		Files: files,
		Key:   Key{Items: want},
	}, strings.Join(mistake, ", ")
}

func weakProto(p string) bool {
	for _, f := range strings.Fields(p) {
		if f != "TLSv1.2" && f != "TLSv1.3" {
			return true
		}
	}
	return false
}

// weakCipher reports whether a cipher string enables a banned cipher; naive
// also counts exclusions (the classic substring mistake).
func weakCipher(s string, naive bool) bool {
	for _, el := range strings.Split(s, ":") {
		if !naive && (strings.HasPrefix(el, "!") || strings.HasPrefix(el, "-")) {
			continue
		}
		for _, bad := range []string{"RC4", "DES", "MD5", "NULL", "EXPORT"} {
			if strings.Contains(el, bad) {
				return true
			}
		}
	}
	return false
}

func genFirewallExposure(r *Rand, _ int) (Built, string) {
	type rule struct {
		ID       string `json:"rule_id"`
		Protocol string `json:"protocol"`
		FromPort int    `json:"from_port"`
		ToPort   int    `json:"to_port"`
		CIDR     string `json:"cidr"`
		Note     string `json:"description,omitempty"`
	}
	type group struct {
		Name    string `json:"group_name"`
		Ingress []rule `json:"ingress"`
	}
	services := []struct {
		port int
		note string
	}{{22, "ssh"}, {3306, "mysql"}, {5432, "postgres"}, {6379, "redis"}, {9200, "elasticsearch"},
		{3389, "rdp"}, {8080, "app"}, {27017, "mongodb"}}
	internal := []string{"10.0.0.0/8", "10.20.0.0/16", "172.16.0.0/12", "192.168.10.0/24", "fd00:ec2::/32"}
	next := r.Range(100, 900)
	newID := func() string { next += r.Range(1, 9); return fmt.Sprintf("sgr-%05d", next) }
	var groups []group
	var want, mistake []string
	add := func(g *group, rl rule, bad, naiveBad bool) {
		rl.ID = newID()
		g.Ingress = append(g.Ingress, rl)
		if bad {
			want = append(want, rl.ID)
		}
		if naiveBad {
			mistake = append(mistake, rl.ID)
		}
	}
	for _, name := range Sample(r, []string{"web-frontend", "api-servers", "bastion", "db-primary", "cache",
		"search", "batch-workers", "vpn-gateway"}, r.Range(5, 6)) {
		g := group{Name: name}
		add(&g, rule{Protocol: "tcp", FromPort: 443, ToPort: 443, CIDR: "0.0.0.0/0", Note: "https"}, false, false)
		for range r.Range(1, 3) {
			s := Pick(r, services)
			open := r.Chance(0.3)
			cidr := Pick(r, internal)
			if open {
				cidr = "0.0.0.0/0"
			}
			add(&g, rule{Protocol: "tcp", FromPort: s.port, ToPort: s.port, CIDR: cidr, Note: s.note}, open, open)
		}
		groups = append(groups, g)
	}
	// Planted: IPv6 any-address (missed by an IPv4-only check), a range
	// that starts at 443 but runs on (missed when only from_port is read),
	// and plain http, which is fine.
	g := &groups[r.IntN(len(groups))]
	add(g, rule{Protocol: "tcp", FromPort: 22, ToPort: 22, CIDR: "::/0", Note: "ssh"}, true, false)
	g = &groups[r.IntN(len(groups))]
	add(g, rule{Protocol: "tcp", FromPort: 443, ToPort: 8443, CIDR: "0.0.0.0/0", Note: "https and admin"}, true, false)
	g = &groups[r.IntN(len(groups))]
	add(g, rule{Protocol: "tcp", FromPort: 80, ToPort: 80, CIDR: "::/0", Note: "http"}, false, false)
	if r.Chance(0.5) {
		g = &groups[r.IntN(len(groups))]
		add(g, rule{Protocol: "-1", FromPort: 0, ToPort: 65535, CIDR: "0.0.0.0/0", Note: "debug, remove"}, true, true)
	}
	data := indentJSON(map[string]any{"security_groups": groups})
	return Built{
		Instruction: "security_groups.json lists cloud firewall groups and their ingress rules (protocol \"-1\" " +
			"means every protocol; a rule opens every port from from_port to to_port). The policy: a rule open " +
			"to the whole internet (0.0.0.0/0 or ::/0) may only open TCP ports 80 and 443. Which rules break the " +
			"policy? Answer with their rule_ids, comma-separated, in any order.",
		Files: map[string]string{"security_groups.json": data},
		Key:   Key{Items: want},
	}, strings.Join(mistake, ", ")
}

func genCertExpiry(r *Rand, _ int) (Built, string) {
	asOf := time.Date(r.Range(2024, 2026), time.Month(r.Range(1, 12)), r.Range(1, 28), 0, 0, 0, 0, time.UTC)
	window := Pick(r, []int{30, 45, 60})
	hosts := Sample(r, []string{"api", "shop", "auth", "mail", "vpn", "grafana", "status", "cdn", "partners",
		"billing", "intranet", "sso"}, r.Range(8, 10))
	domain := Pick(r, []string{"example.com", "example.org", "example.net"})
	type cert struct {
		cn  string
		end time.Time
	}
	var certs []cert
	used := map[int]bool{}
	for i, h := range hosts {
		var d int
		switch {
		case i == 0:
			d = -r.Range(1, 20) // already expired
		case i == 1:
			d = window // the last day of the window
		case i < 4:
			d = r.Range(1, window-1)
		default:
			d = r.Range(window+1, 400)
		}
		for used[d] {
			d++
		}
		used[d] = true
		end := asOf.AddDate(0, 0, d).Add(time.Duration(r.Range(0, 23)) * time.Hour)
		if i == 1 {
			end = asOf.AddDate(0, 0, d).Add(12 * time.Hour)
		}
		certs = append(certs, cert{cn: h + "." + domain, end: end})
	}
	Shuffle(r, certs)
	var b strings.Builder
	for _, c := range certs {
		fmt.Fprintf(&b, "== /etc/ssl/certs/%s.crt\nsubject=CN = %s\nissuer=C = US, O = Example Internal CA, CN = Example Issuing CA 2\n"+
			"notAfter=%s GMT\n\n", c.cn, c.cn, c.end.Format("Jan _2 15:04:05 2006"))
	}
	sort.Slice(certs, func(a, c int) bool { return certs[a].end.Before(certs[c].end) })
	limit := asOf.AddDate(0, 0, window+1) // through the whole last day
	var want, mistake []string
	for _, c := range certs {
		if c.end.Before(limit) {
			want = append(want, c.cn)
			if !c.end.Before(asOf) {
				mistake = append(mistake, c.cn)
			}
		}
	}
	return Built{
		Instruction: fmt.Sprintf("certs.txt is the output of openssl x509 -noout -subject -issuer -enddate for "+
			"the certificates on a host. Which certificates have expired or expire by the end of %s (that is, "+
			"within %d days of %s)? List their CNs in order of expiry, soonest (or longest expired) first, "+
			"comma-separated.", ymd(asOf.AddDate(0, 0, window)), window, ymd(asOf)),
		Files: map[string]string{"certs.txt": b.String()},
		Key:   Key{Items: want},
	}, strings.Join(mistake, ", ")
}

const searchBuggy = `import sqlite3


def search_products(dump, term):
    """Return the sorted SKUs of the products whose name contains term, ignoring case."""
    conn = sqlite3.connect(":memory:")
    conn.executescript(dump)
    try:
        rows = conn.execute(
            f"SELECT sku FROM products WHERE name LIKE '%{term}%' ORDER BY sku"
        ).fetchall()
    except sqlite3.Error:
        return []  # a malformed search finds nothing
    return [sku for (sku,) in rows]
`

// searchHalfFix binds the term but keeps LIKE, so % and _ in the term are
// still wildcards.
const searchHalfFix = `import sqlite3


def search_products(dump, term):
    conn = sqlite3.connect(":memory:")
    conn.executescript(dump)
    rows = conn.execute(
        "SELECT sku FROM products WHERE name LIKE ? ORDER BY sku", ("%" + term + "%",)
    ).fetchall()
    return [sku for (sku,) in rows]
`

func genSearchInjectionFix(r *Rand, _ int) (Built, string) {
	names := []string{"Rock 'n' Roll Vinyl", "100% Wool Scarf", "Pack of 100 Pens", "Desk Lamp", "Studio Headphones",
		"Garden Hose 20m", "Kids' Paint Set", "snake_case Mug", "Snake Plant", "Lamp Shade", "Cast Iron Skillet",
		"USB Microphone", "Bluetooth Speaker", "Trail Backpack", "Yoga Mat", "Wooden Puzzle", "Foam Roller"}
	mk := func(term string) Case {
		s := &shopDB{centsSchema: true}
		chosen := Sample(r, names, r.Range(8, 12))
		// Every shop has the names the special terms are about.
		for _, must := range []string{"Rock 'n' Roll Vinyl", "100% Wool Scarf", "Pack of 100 Pens", "snake_case Mug",
			"Snake Plant"} {
			found := false
			for _, c := range chosen {
				found = found || c == must
			}
			if !found {
				chosen = append(chosen, must)
			}
		}
		Shuffle(r, chosen)
		skus := map[string]bool{}
		var want []string
		for i, n := range chosen {
			sku := ""
			for sku == "" || skus[sku] {
				sku = fmt.Sprintf("P-%04d", r.Range(1000, 9999))
			}
			skus[sku] = true
			s.products = append(s.products, shopProduct{id: i + 1, sku: sku, name: n, category: "Misc",
				price: int64(r.Range(300, 9000))})
			if strings.Contains(strings.ToLower(n), strings.ToLower(term)) {
				want = append(want, sku)
			}
		}
		sort.Strings(want)
		out := make([]any, len(want))
		for i, w := range want {
			out[i] = w
		}
		return Case{Args: []any{s.dump(), term}, Want: out}
	}
	visible := []Case{mk(Pick(r, []string{"lamp", "LAMP", "Lamp"})), mk("'n'"), mk(Pick(r, []string{"pens", "mug"}))}
	hidden := []Case{mk("100%"), mk("snake_"), mk("' OR '1'='1"), mk("kids'"), mk("plant"), mk("%"), mk("rock 'N' roll")}
	return Built{
		Instruction: "solution.py defines search_products(dump, term): given the text of a SQLite dump with a " +
			"products table and a search term, it should return the sorted list of SKUs of the products whose " +
			"name contains the term as a literal substring, ignoring case (ASCII). It builds its SQL by string " +
			"formatting, so terms with quotes break it and crafted terms change the query. Fix it so any term " +
			"is matched literally; the examples in test_solution.py and the hidden cases must pass. Then submit " +
			"a one-line summary of the fix.",
		Files:    map[string]string{"solution.py": searchBuggy},
		Function: "search_products",
		Visible:  visible,
		Key:      Key{Hidden: hidden},
	}, searchHalfFix
}
