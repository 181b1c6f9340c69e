package tasks

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// configFamilies are configuration audits across INI, YAML, TOML, JSON and
// env files. The YAML they write is a plain subset (block mappings, scalars,
// comments, "---" documents, and lists only where the task never reads
// into them), so an agent can read it with or without a YAML library.
func configFamilies() []Family {
	return []Family{
		{
			Domain:  "config",
			Name:    "port_conflict",
			Kind:    KindSet,
			Summary: "find the services whose configured port another service also uses, across five formats",
			Build:   buildPortConflict,
		},
		{
			Domain:  "config",
			Name:    "missing_required",
			Kind:    KindSet,
			Summary: "list the required settings a production YAML file lacks",
			Build:   buildMissingRequired,
		},
		{
			Domain:  "config",
			Name:    "effective_value",
			Kind:    KindNumber,
			Summary: "work out a setting's effective value from TOML defaults, a YAML file and env overrides",
			Build:   buildEffectiveValue,
		},
		{
			Domain:  "config",
			Name:    "type_mismatch",
			Kind:    KindSet,
			Summary: "find the TOML settings whose values do not have the type the schema requires",
			Build:   buildTypeMismatch,
		},
		{
			Domain:  "config",
			Name:    "debug_in_prod",
			Kind:    KindSet,
			Summary: "find the production configs that enable debug, across INI, YAML, TOML and JSON",
			Build:   buildDebugInProd,
		},
		{
			Domain:  "config",
			Name:    "staging_only_keys",
			Kind:    KindList,
			Summary: "list, sorted, the settings staging.json has and production.json lacks",
			Build:   buildStagingOnlyKeys,
		},
		{
			Domain:  "config",
			Name:    "replica_total",
			Kind:    KindNumber,
			Summary: "sum the replicas of one namespace's Deployments across Kubernetes manifests",
			Build:   buildReplicaTotal,
		},
	}
}

// kv is one ordered setting: v is a scalar (string, int, bool, float64) or
// a nested []kv.
type kv struct {
	k string
	v any
}

// renderConfig writes settings in a format: "ini" (one level of sections),
// "yaml", "toml" (sections for nested tables), "json" or "env" (flat).
func renderConfig(format string, settings []kv) string {
	var b strings.Builder
	switch format {
	case "json":
		b.WriteString(jsonObject(settings, ""))
		b.WriteString("\n")
	case "yaml":
		writeYAML(&b, settings, "")
	case "ini", "toml":
		var tables []kv
		for _, s := range settings {
			if sub, ok := s.v.([]kv); ok {
				tables = append(tables, kv{s.k, sub})
				continue
			}
			fmt.Fprintf(&b, "%s = %s\n", s.k, scalar(format, s.v))
		}
		for i, t := range tables {
			if i > 0 || b.Len() > 0 {
				b.WriteString("\n")
			}
			fmt.Fprintf(&b, "[%s]\n", t.k)
			for _, s := range t.v.([]kv) {
				fmt.Fprintf(&b, "%s = %s\n", s.k, scalar(format, s.v))
			}
		}
	case "env":
		for _, s := range settings {
			fmt.Fprintf(&b, "%s=%s\n", s.k, scalar(format, s.v))
		}
	}
	return b.String()
}

func writeYAML(b *strings.Builder, settings []kv, indent string) {
	for _, s := range settings {
		if sub, ok := s.v.([]kv); ok {
			fmt.Fprintf(b, "%s%s:\n", indent, s.k)
			writeYAML(b, sub, indent+"  ")
			continue
		}
		fmt.Fprintf(b, "%s%s: %s\n", indent, s.k, scalar("yaml", s.v))
	}
}

func jsonObject(settings []kv, indent string) string {
	var b strings.Builder
	b.WriteString("{\n")
	for i, s := range settings {
		k, _ := json.Marshal(s.k)
		var v string
		if sub, ok := s.v.([]kv); ok {
			v = jsonObject(sub, indent+"  ")
		} else {
			data, _ := json.Marshal(s.v)
			v = string(data)
		}
		fmt.Fprintf(&b, "%s  %s: %s", indent, k, v)
		if i < len(settings)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString(indent + "}")
	return b.String()
}

// rawValue is a scalar written exactly as given in any format, for values
// whose spelling is the point (yes/on, a quoted number).
type rawValue string

// scalar renders one value in a format.
func scalar(format string, v any) string {
	switch x := v.(type) {
	case rawValue:
		return string(x)
	case string:
		if format == "toml" || format == "json" || (format == "yaml" && needsQuote(x)) {
			q, _ := json.Marshal(x)
			return string(q)
		}
		return x
	case bool:
		return fmt.Sprint(x)
	case float64:
		return fmt.Sprintf("%g", x)
	}
	return fmt.Sprint(v)
}

func needsQuote(s string) bool {
	switch strings.ToLower(s) {
	case "", "yes", "no", "on", "off", "true", "false", "null", "~":
		return true
	}
	return strings.ContainsAny(s, ":#{}[],&*!|>'\"%@`") || strings.Trim(s, "0123456789.-+") == ""
}

// extOf gives the file extension of a format.
var extOf = map[string]string{"ini": ".ini", "yaml": ".yaml", "toml": ".toml", "json": ".json", "env": ".env"}

func buildPortConflict(r *Rand, _ int) Built {
	names := Sample(r, []string{"api", "auth", "billing", "cart", "catalog", "gateway", "ledger", "mailer",
		"reports", "search", "uploads", "webhooks"}, r.Range(7, 9))
	formats := []string{"ini", "yaml", "toml", "json", "env"}
	ports := make([]int, len(names))
	used := map[int]bool{}
	for i := range ports {
		for ports[i] == 0 || used[ports[i]] {
			ports[i] = Pick(r, []int{8000, 8080, 8081, 8443, 9000, 9090, 9100, 5000, 5001, 3000, 7070, 6060})
		}
		used[ports[i]] = true
	}
	// One or two clashes: a later service takes an earlier one's port.
	clashes := r.Range(1, 2)
	for c := range clashes {
		ports[len(ports)-1-c] = ports[c]
	}
	files := map[string]string{}
	var want []string
	count := map[int]int{}
	for _, p := range ports {
		count[p]++
	}
	for i, name := range names {
		format := formats[(i+r.IntN(2))%len(formats)]
		decoy := Pick(r, []int{9901, 9902, 15000, 4040}) + i
		var text string
		switch format {
		case "ini":
			text = renderConfig("ini", []kv{{"server", []kv{{"host", "0.0.0.0"}, {"port", ports[i]}}},
				{"admin", []kv{{"admin_port", decoy}}}})
			text = "; legacy listener, disabled\n; port = " + fmt.Sprint(ports[(i+1)%len(ports)]) + "\n" + text
		case "yaml":
			text = renderConfig("yaml", []kv{{"service", name}, {"server", []kv{{"bind", "0.0.0.0"}, {"port", ports[i]}}},
				{"metrics", []kv{{"metrics_port", decoy}}}})
			text += fmt.Sprintf("# port: %d  (old value)\n", ports[(i+2)%len(ports)])
		case "toml":
			text = renderConfig("toml", []kv{{"name", name}, {"http", []kv{{"port", ports[i]}, {"read_timeout", "5s"}}},
				{"debug", []kv{{"pprof_port", decoy}}}})
		case "json":
			text = renderConfig("json", []kv{{"name", name}, {"listen", []kv{{"address", "0.0.0.0"}, {"port", ports[i]}}},
				{"upstream", []kv{{"target_port", ports[(i+3)%len(ports)]}}}})
		case "env":
			text = fmt.Sprintf("# %s service\nHOST=0.0.0.0\nPORT=%d\n#PORT=%d\nHEALTH_PORT=%d\n", name, ports[i], ports[(i+1)%len(ports)], decoy)
		}
		files["services/"+name+extOf[format]] = text
		if count[ports[i]] > 1 {
			want = append(want, name)
		}
	}
	sort.Strings(want)
	return Built{
		Instruction: "services/ holds one configuration file per service, in several formats (INI, YAML, TOML, " +
			"JSON, env). A service listens on the value of its setting named exactly port (PORT in env files); " +
			"commented-out lines and other *_port settings do not count. Which services listen on a port " +
			"that another service also listens on? Answer with the service names (the file names without " +
			"the extension), separated by commas (order does not matter; credit is the fraction found, " +
			"reduced for extra names).",
		Files: files,
		Key:   Key{Items: want},
	}
}

func buildMissingRequired(r *Rand, _ int) Built {
	all := []kv{
		{"database", []kv{{"host", "db.internal"}, {"port", 5432}, {"name", "shop"}, {"user", "shop_app"}, {"pool_size", 20}}},
		{"cache", []kv{{"host", "redis.internal"}, {"port", 6379}, {"ttl_seconds", 300}}},
		{"auth", []kv{{"issuer", "https://login.example.com"}, {"audience", "shop-api"}, {"token_ttl", 3600}}},
		{"smtp", []kv{{"host", "smtp.example.com"}, {"port", 587}, {"sender", "noreply@example.com"}}},
		{"logging", []kv{{"level", "info"}, {"format", "json"}}},
	}
	var keys []string
	for _, sec := range all {
		for _, s := range sec.v.([]kv) {
			keys = append(keys, sec.k+"."+s.k)
		}
	}
	required := Sample(r, keys, r.Range(11, 14))
	sort.Strings(required)
	missing := map[string]bool{}
	for _, k := range Sample(r, required, r.Range(2, 4)) {
		missing[k] = true
	}
	// A setting production lacks that nothing requires: not part of the answer.
	var optional []string
	for _, k := range keys {
		if indexOf(required, k) < 0 {
			optional = append(optional, k)
		}
	}
	unrequired := Pick(r, optional)
	var prod, staging []kv
	var commented []string
	for _, sec := range all {
		var p, s []kv
		for _, set := range sec.v.([]kv) {
			key := sec.k + "." + set.k
			s = append(s, set)
			if key == unrequired {
				continue
			}
			if missing[key] {
				if r.Chance(0.4) {
					commented = append(commented, key)
				}
				continue
			}
			p = append(p, set)
		}
		prod = append(prod, kv{sec.k, p})
		staging = append(staging, kv{sec.k, s})
	}
	prodText := "# production settings\n" + renderConfig("yaml", prod)
	for _, c := range commented {
		sec, key, _ := strings.Cut(c, ".")
		prodText += fmt.Sprintf("# TODO %s.%s was here before the migration\n#%s:\n#  %s: changeme\n", sec, key, sec, key)
	}
	schema, _ := json.MarshalIndent(map[string]any{"service": "shop-api", "required": required}, "", "  ")
	want := mapKeys(missing)
	return Built{
		Instruction: "schema.json lists the settings the service requires, as dotted paths (section.key). " +
			"config/production.yaml is the production configuration (config/staging.yaml is staging's, for " +
			"comparison; commented-out lines do not count). Which required settings are missing from " +
			"production.yaml? Answer with the dotted paths, separated by commas (order does not matter; " +
			"credit is the fraction found, reduced for extra paths).",
		Files: map[string]string{
			"schema.json":            string(schema) + "\n",
			"config/production.yaml": prodText,
			"config/staging.yaml":    "# staging settings\n" + renderConfig("yaml", staging),
		},
		Key: Key{Items: want},
	}
}

func buildEffectiveValue(r *Rand, _ int) Built {
	type setting struct{ section, key string }
	candidates := []setting{{"pool", "max_connections"}, {"http", "timeout_seconds"}, {"worker", "concurrency"},
		{"cache", "max_entries"}, {"queue", "batch_size"}}
	target := Pick(r, candidates)
	val := func() int { return r.Range(2, 64) * Pick(r, []int{1, 5, 10}) }
	defaults, yamlV, envV := map[setting]int{}, map[setting]int{}, map[setting]int{}
	for _, c := range candidates {
		defaults[c] = val()
		if r.Chance(0.5) {
			yamlV[c] = val()
		}
		if r.Chance(0.3) {
			envV[c] = val()
		}
	}
	// Which layer decides the target varies: defaults, YAML or env.
	switch layer := r.IntN(3); layer {
	case 0:
		delete(yamlV, target)
		delete(envV, target)
	case 1:
		yamlV[target] = val()
		delete(envV, target)
	case 2:
		yamlV[target] = val()
		envV[target] = val()
	}
	want := defaults[target]
	if v, ok := yamlV[target]; ok {
		want = v
	}
	if v, ok := envV[target]; ok {
		want = v
	}
	var tomlS, yamlS []kv
	for _, c := range candidates {
		tomlS = append(tomlS, kv{c.section, []kv{{c.key, defaults[c]}}})
		if v, ok := yamlV[c]; ok {
			yamlS = append(yamlS, kv{c.section, []kv{{c.key, v}}})
		}
	}
	envName := func(c setting) string { return "APP_" + strings.ToUpper(c.section+"_"+c.key) }
	var env strings.Builder
	env.WriteString("# overrides for this host\n")
	for _, c := range candidates {
		if v, ok := envV[c]; ok {
			fmt.Fprintf(&env, "%s=%d\n", envName(c), v)
		}
	}
	// Decoys: a commented-out override and a misspelt one for the target.
	decoy := func() int {
		for {
			if v := val(); v != want {
				return v
			}
		}
	}
	fmt.Fprintf(&env, "# %s=%d\n", envName(target), decoy())
	fmt.Fprintf(&env, "%s=%d\n", strings.TrimSuffix(envName(target), "S")+"X", decoy())
	return Built{
		Instruction: fmt.Sprintf("The service reads its settings in three layers, each overriding the one "+
			"before: defaults.toml, then app.yaml, then the environment variables in app.env, where "+
			"APP_<SECTION>_<KEY> (upper case) overrides section.key. Commented-out lines and variables that "+
			"do not name a setting exactly are ignored. What is the effective value of %s.%s? Answer with "+
			"the number (it must be exact).", target.section, target.key),
		Files: map[string]string{
			"defaults.toml": "# built-in defaults\n" + renderConfig("toml", tomlS),
			"app.yaml":      "# deployment settings\n" + renderConfig("yaml", yamlS),
			"app.env":       env.String(),
		},
		Key: Key{Answer: fmt.Sprint(want)},
	}
}

func buildTypeMismatch(r *Rand, _ int) Built {
	type field struct {
		section, key, typ string
		good, bad         any
	}
	fields := []field{
		{"server", "port", "integer", r.Range(1024, 9999), rawValue(fmt.Sprintf("%q", fmt.Sprint(r.Range(1024, 9999))))},
		{"server", "host", "string", "0.0.0.0", r.Range(1, 9)},
		{"server", "debug", "boolean", false, rawValue(`"false"`)},
		{"server", "read_timeout", "number", 2.5, rawValue(`"2.5s"`)},
		{"database", "url", "string", "postgres://db.internal/app", rawValue(`["postgres://db.internal/app"]`)},
		{"database", "pool_size", "integer", r.Range(5, 50), 12.5},
		{"database", "ssl", "boolean", true, rawValue(`"yes"`)},
		{"features", "beta", "boolean", false, 0},
		{"features", "max_upload_mb", "integer", r.Range(10, 500), rawValue(`"100MB"`)},
		{"features", "rollout", "number", 0.25, rawValue(`"25%"`)},
		{"logging", "level", "string", "info", rawValue(`{ name = "info" }`)},
		{"logging", "sample_rate", "number", 1, rawValue(`true`)},
	}
	// At least one quoted and one unquoted wrong value.
	bad := map[int]bool{Pick(r, []int{0, 2, 3, 6, 8, 9}): true, Pick(r, []int{1, 4, 5, 7, 10, 11}): true}
	for k := r.Range(3, 5); len(bad) < k; {
		bad[r.IntN(len(fields))] = true
	}
	schema := map[string]any{}
	var settings []kv
	var want []string
	for i, f := range fields {
		props, _ := schema[f.section].(map[string]any)
		if props == nil {
			props = map[string]any{}
			schema[f.section] = props
			settings = append(settings, kv{f.section, []kv{}})
		}
		props[f.key] = f.typ
		v := f.good
		if bad[i] {
			v = f.bad
			want = append(want, f.section+"."+f.key)
		}
		last := &settings[len(settings)-1]
		last.v = append(last.v.([]kv), kv{f.key, v})
	}
	data, _ := json.MarshalIndent(map[string]any{
		"note":       "integer: a whole number; number: integer or decimal; boolean: true/false; string: text",
		"properties": schema,
	}, "", "  ")
	sort.Strings(want)
	return Built{
		Instruction: "schema.json gives the type every setting in settings.toml must have (section -> key -> " +
			"type; a number may be an integer or a decimal, an integer may not be a decimal, and a quoted " +
			"value is a string whatever it says). Which settings in settings.toml have a value of the wrong " +
			"type? Answer with their dotted paths (section.key), separated by commas (order does not " +
			"matter; credit is the fraction found, reduced for extra paths).",
		Files: map[string]string{"schema.json": string(data) + "\n", "settings.toml": renderConfig("toml", settings)},
		Key:   Key{Items: want},
	}
}

func buildDebugInProd(r *Rand, _ int) Built {
	names := Sample(r, []string{"api", "billing", "checkout", "catalog", "ingest", "notifier", "reports",
		"search", "sessions", "uploads"}, r.Range(7, 9))
	formats := []string{"ini", "yaml", "toml", "json"}
	truthy := map[string][]rawValue{
		"ini":  {"true", "yes", "on", "1"},
		"yaml": {"true", "yes", "on", "True"},
		"toml": {"true"},
		"json": {"true"},
	}
	falsy := map[string][]rawValue{
		"ini":  {"false", "no", "off", "0"},
		"yaml": {"false", "no", "off", "False"},
		"toml": {"false"},
		"json": {"false"},
	}
	files := map[string]string{}
	var want []string
	for i, name := range names {
		format := formats[(i+r.IntN(3))%len(formats)]
		env := Pick(r, []string{"production", "production", "staging", "development"})
		debug := r.Chance(0.45)
		switch i { // every variant has each kind of file at least once
		case 0, 1:
			env, debug = "production", true
		case 2:
			env, debug = "production", false
		case 3:
			env, debug = "staging", true
		}
		envVal := any(env)
		if format == "ini" || format == "yaml" {
			envVal = rawValue(Pick(r, []string{env, strings.ToUpper(env[:1]) + env[1:]}))
		}
		dv := Pick(r, falsy[format])
		if debug {
			dv = Pick(r, truthy[format])
		}
		settings := []kv{{"app", []kv{{"name", name}, {"environment", envVal}, {"debug", dv}}},
			{"logging", []kv{{"level", Pick(r, []string{"info", "warn", "debug"})}}}}
		path := "configs/" + name + extOf[format]
		text := renderConfig(format, settings)
		if format == "json" {
			data, _ := json.Marshal(map[string]any{"app": map[string]any{"name": name, "environment": env, "debug": debug},
				"logging": map[string]any{"level": Pick(r, []string{"info", "warn"})}})
			text = string(data) + "\n"
		}
		if format != "json" && r.Chance(0.4) {
			c := map[string]string{"ini": "; ", "yaml": "# ", "toml": "# "}[format]
			text = c + "debug was turned " + Pick(r, []string{"on", "off"}) + " during the incident review\n" + text
		}
		files[path] = text
		if env == "production" && debug {
			want = append(want, name+extOf[format])
		}
	}
	sort.Strings(want)
	return Built{
		Instruction: "configs/ holds one file per service (INI, YAML, TOML or JSON), each with an app section " +
			"giving its environment and whether debug is on. Boolean values may be written true/false, " +
			"yes/no, on/off or 1/0, in any case; the environment name is compared case-insensitively. Which " +
			"files put a production environment in debug mode? Answer with the file names (e.g. api.yaml, " +
			"without configs/), separated by commas (order does not matter; credit is the fraction found, " +
			"reduced for extra names).",
		Files: files,
		Key:   Key{Items: want},
	}
}

func buildStagingOnlyKeys(r *Rand, _ int) Built {
	tree := []kv{
		{"service", []kv{{"name", "orders"}, {"replicas", r.Range(2, 6)}, {"region", Pick(r, []string{"eu-west-1", "us-east-2"})}}},
		{"database", []kv{{"host", "db.internal"}, {"port", 5432}, {"read_replica", "db-ro.internal"}, {"statement_timeout_ms", 5000}}},
		{"cache", []kv{{"host", "cache.internal"}, {"ttl_seconds", 600}, {"warmup", true}}},
		{"features", []kv{{"new_checkout", true}, {"gift_cards", false}, {"bulk_export", true}, {"dark_mode", true}}},
		{"observability", []kv{{"tracing", true}, {"sample_rate", 0.1}, {"profiling", false}}},
		{"payments", []kv{{"provider", "acme-pay"}, {"sandbox", false}, {"retry_limit", 3}}},
	}
	var leaves []string
	for _, sec := range tree {
		for _, s := range sec.v.([]kv) {
			leaves = append(leaves, sec.k+"."+s.k)
		}
	}
	drop := map[string]bool{}
	for _, k := range Sample(r, leaves, r.Range(3, 5)) {
		drop[k] = true
	}
	prodOnly := Pick(r, leaves) // a key only production has: not part of the answer
	for drop[prodOnly] {
		prodOnly = Pick(r, leaves)
	}
	var staging, prod []kv
	for _, sec := range tree {
		var s, p []kv
		for _, set := range sec.v.([]kv) {
			key := sec.k + "." + set.k
			v := set.v
			if _, isBool := v.(bool); isBool && r.Chance(0.4) {
				v = !v.(bool) // values differ between the files; only presence matters
			}
			if key != prodOnly {
				s = append(s, set)
			}
			if !drop[key] {
				p = append(p, kv{set.k, v})
			}
		}
		staging = append(staging, kv{sec.k, s})
		prod = append(prod, kv{sec.k, p})
	}
	prod = append(prod, kv{"alerts", []kv{{"pager", "ops-oncall"}}})
	return Built{
		Instruction: "staging.json and production.json configure the same service. Which settings (leaf keys, " +
			"as dotted paths section.key) exist in staging.json but not in production.json? Values do not " +
			"matter, only whether the key is present. Answer with the dotted paths sorted alphabetically, " +
			"separated by commas (order matters; each position is scored).",
		Files: map[string]string{
			"staging.json":    jsonObject(staging, "") + "\n",
			"production.json": jsonObject(prod, "") + "\n",
		},
		Key: Key{Items: mapKeys(drop)},
	}
}

func buildReplicaTotal(r *Rand, _ int) Built {
	namespaces := Sample(r, []string{"shop", "payments", "search", "internal-tools", "data"}, 3)
	target := namespaces[0]
	apps := []string{"web", "api", "worker", "scheduler", "gateway", "indexer", "exporter", "consumer"}
	files := map[string]string{}
	total := 0
	doc := func(kind, name, ns string, replicas int, hpa bool) string {
		var b strings.Builder
		apiVersion := "apps/v1"
		if kind == "HorizontalPodAutoscaler" {
			apiVersion = "autoscaling/v2"
		}
		fmt.Fprintf(&b, "apiVersion: %s\nkind: %s\nmetadata:\n  name: %s\n  namespace: %s\n  labels:\n    app: %s\n", apiVersion, kind, name, ns, name)
		if hpa {
			fmt.Fprintf(&b, "spec:\n  scaleTargetRef:\n    kind: Deployment\n    name: %s\n  minReplicas: %d\n  maxReplicas: %d\n", name, replicas, replicas*3)
			return b.String()
		}
		fmt.Fprintf(&b, "spec:\n  replicas: %d\n  selector:\n    matchLabels:\n      app: %s\n  template:\n    spec:\n      containers:\n"+
			"        - name: %s\n          image: registry.example.com/%s:1.%d.%d\n          ports:\n            - containerPort: %d\n",
			replicas, name, name, name, r.Range(0, 9), r.Range(0, 20), Pick(r, []int{8080, 9000, 3000}))
		return b.String()
	}
	targetDeploys := 0
	for i, app := range Sample(r, apps, 6) {
		var docs []string
		ns := namespaces[i%len(namespaces)]
		if i < 3 {
			ns = target
		}
		n := r.Range(1, 6)
		docs = append(docs, doc("Deployment", app, ns, n, false))
		if ns == target {
			total += n
			targetDeploys++
		}
		switch i % 3 {
		case 0: // an autoscaler's minReplicas is not a Deployment's replicas
			docs = append(docs, doc("HorizontalPodAutoscaler", app, ns, r.Range(2, 4), true))
		case 1: // a StatefulSet is not a Deployment
			docs = append(docs, doc("StatefulSet", app+"-db", ns, r.Range(1, 3), false))
		}
		if r.Chance(0.3) {
			docs[0] = "# replicas: 10 during the sale\n" + docs[0]
		}
		files["k8s/"+app+".yaml"] = strings.Join(docs, "---\n")
	}
	return Built{
		Instruction: fmt.Sprintf("k8s/ holds Kubernetes manifests (several YAML documents per file, separated "+
			"by ---). What is the total of spec.replicas over every Deployment (kind: Deployment only) in "+
			"namespace %q? Answer with the number (it must be exact).", target),
		Files: files,
		Key:   Key{Answer: fmt.Sprint(total)},
	}
}
