package grader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentpen/agentpen/internal/testkit/testlog"
	"github.com/agentpen/agentpen/workbench/episode"
	"github.com/agentpen/agentpen/workbench/tasks"
	"github.com/google/go-cmp/cmp"
)

func TestNewServerNeedsKey(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		cfg      ServerConfig
		wantNoKy bool
	}{
		{name: "no_key", cfg: ServerConfig{}, wantNoKy: true},
		{name: "insecure_no_key", cfg: ServerConfig{InsecureNoKey: true}},
		{name: "key", cfg: ServerConfig{Key: testKey}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewServer(tt.cfg)
			if got := errors.Is(err, ErrNoKey); got != tt.wantNoKy {
				t.Fatalf("NewServer: err = %v, want ErrNoKey: %v", err, tt.wantNoKy)
			}
			if !tt.wantNoKy && err != nil {
				t.Fatalf("NewServer: %v", err)
			}
		})
	}
}

// validBodies are requests each protected route would grade with the
// right key.
var validBodies = map[string]string{
	RouteScore: `{"task_id":"logs/error_count","answer":"42"}`,
	RouteCases: `{"task_id":"software/median"}`,
	RouteJudge: `{"task_id":"software/median","visible_passed":[true,true,true],"hidden":[{},{},{},{},{},{}]}`,
}

// TestBadKeysRefused: every protected route refuses a missing or wrong key
// with 401 and a fixed body that repeats nothing it was sent, and the
// refused call builds no task (the catalogue's build count, the only
// thing a call could change, is the same before and after). The same
// request with the right key is graded, so the check is live.
func TestBadKeysRefused(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testKey)
	const wantBody = `{"code":"unauthorized","message":"missing or wrong API key"}` + "\n"
	for _, tt := range []struct {
		name    string
		headers []string
		query   string
	}{
		{name: "no_key"},
		{name: "empty_key", headers: []string{KeyHeader + ": "}},
		{name: "wrong_key_same_length", headers: []string{KeyHeader + ": " + strings.Repeat("x", len(testKey))}},
		{name: "key_prefix", headers: []string{KeyHeader + ": " + testKey[:len(testKey)-1]}},
		{name: "key_with_suffix", headers: []string{KeyHeader + ": " + testKey + "0"}},
		{name: "key_other_case", headers: []string{KeyHeader + ": " + strings.ToUpper(testKey)}},
		{name: "two_headers_one_right", headers: []string{KeyHeader + ": " + testKey, KeyHeader + ": wrong-canary-7731"}},
		{name: "bearer_instead", headers: []string{"Authorization: Bearer " + testKey}},
		{name: "key_in_query", query: "?api_key=" + testKey + "&key=" + testKey},
		{name: "other_header_name", headers: []string{"X-Api-Token: " + testKey}},
	} {
		for _, route := range []string{RouteScore, RouteCases, RouteJudge} {
			t.Run(tt.name+"_"+strings.ReplaceAll(strings.TrimPrefix(route, "/"), "/", "_"), func(t *testing.T) {
				before := ts.cat.builds.Load()
				r := do(t, http.MethodPost, ts.url+route+tt.query, validBodies[route], tt.headers...)
				if r.status != http.StatusUnauthorized || r.body != wantBody {
					t.Fatalf("got %d %q, want 401 %q", r.status, r.body, wantBody)
				}
				if strings.Contains(r.body, "canary") || strings.Contains(r.body, "median") {
					t.Errorf("reply echoes the request: %q", r.body)
				}
				// Other subtests run in parallel with this one only after
				// it returns, so the count is this call's alone.
				if after := ts.cat.builds.Load(); after != before {
					t.Errorf("catalogue builds: %d before, %d after a refused call", before, after)
				}
			})
		}
	}
	for _, route := range []string{RouteScore, RouteCases, RouteJudge} {
		for _, name := range []string{KeyHeader, strings.ToLower(KeyHeader)} {
			before := ts.cat.builds.Load()
			r := do(t, http.MethodPost, ts.url+route, validBodies[route], name+": "+testKey)
			if r.status != http.StatusOK {
				t.Errorf("%s with the right key in %s: %d %s", route, name, r.status, r.body)
			}
			if ts.cat.builds.Load() != before+1 {
				t.Errorf("%s with the right key: builds %d -> %d, want one build", route, before, ts.cat.builds.Load())
			}
		}
	}
}

// TestPublicRoutes: /health and /docs need no key; an unknown route or
// method is a JSON 404/405 that repeats nothing of the path.
func TestPublicRoutes(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testKey)
	if r := do(t, http.MethodGet, ts.url+RouteHealth, ""); r.status != 200 || r.body != `{"status":"healthy"}`+"\n" {
		t.Errorf("GET /health: %d %q", r.status, r.body)
	}
	r := do(t, http.MethodGet, ts.url+RouteDocs, "")
	var d struct {
		Routes []struct {
			Method, Path string
			Auth         bool
		}
	}
	if err := json.Unmarshal([]byte(r.body), &d); r.status != 200 || err != nil {
		t.Fatalf("GET /docs: %d %v %q", r.status, err, r.body)
	}
	var protected []string
	for _, rt := range d.Routes {
		if rt.Auth {
			protected = append(protected, rt.Method+" "+rt.Path)
		}
	}
	if diff := cmp.Diff([]string{"POST /v1/score", "POST /v1/cases", "POST /v1/judge", "GET /v1/counters"}, protected); diff != "" {
		t.Errorf("/docs protected routes (-want +got):\n%s", diff)
	}
	for _, tt := range []struct {
		name, method, path string
		status             int
	}{
		{name: "unknown_route", method: "GET", path: "/v1/answers/canary-path-1", status: 404},
		{name: "get_protected", method: "GET", path: RouteScore, status: 405},
		{name: "post_health", method: "POST", path: RouteHealth, status: 405},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := do(t, tt.method, ts.url+tt.path, "", KeyHeader+": "+testKey)
			if r.status != tt.status || strings.Contains(r.body, "canary") || !json.Valid([]byte(r.body)) {
				t.Errorf("got %d %q, want %d with a JSON body that does not repeat the path", r.status, r.body, tt.status)
			}
		})
	}
}

// TestScoreMatchesInProcess: /v1/score gives, for every non-code family
// on two variants, the credit and reason package tasks gives, for the key
// answer and for wrong and partial answers.
func TestScoreMatchesInProcess(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testKey)
	n := 0
	for _, id := range tasks.IDs() {
		for _, v := range []string{"", "@3"} {
			task, err := tasks.Build(id + v)
			if err != nil {
				t.Fatal(err)
			}
			if task.Kind == tasks.KindCode {
				continue
			}
			answers := []string{keyAnswer(task), "zz-wrong", " " + keyAnswer(task) + "\n"}
			if len(task.Key.Items) > 1 {
				answers = append(answers, strings.Join(task.Key.Items[1:], "\n"), task.Key.Items[0]+"\nextra-item")
			}
			for _, a := range answers {
				wantC, wantWhy := tasks.ScoreAnswer(task, a)
				body, _ := json.Marshal(scoreRequest{TaskID: task.TaskID, Answer: a})
				r := do(t, http.MethodPost, ts.url+RouteScore, string(body), KeyHeader+": "+testKey)
				var got verdict
				if err := json.Unmarshal([]byte(r.body), &got); r.status != 200 || err != nil {
					t.Fatalf("%s: %d %q", task.TaskID, r.status, r.body)
				}
				if got != (verdict{wantC, wantWhy}) {
					t.Errorf("%s answer %q: got %+v, want {%v %s}", task.TaskID, a, got, wantC, wantWhy)
				}
				n++
			}
			if c, _ := tasks.ScoreAnswer(task, keyAnswer(task)); c != 1 {
				t.Errorf("%s: the key answer scores %v in-process; the test's answer is wrong", task.TaskID, c)
			}
		}
	}
	if n < 100 {
		t.Fatalf("only %d answers scored", n)
	}
}

// TestCasesAndJudgeMatchInProcess: for every code family, /v1/cases gives
// exactly the hidden arguments, and /v1/judge gives what
// episode.LocalGrader gives for all-right, none-printed, partly right and
// failing-example outputs.
func TestCasesAndJudgeMatchInProcess(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testKey)
	local := episode.LocalGrader(nil)
	c, err := NewClient(ClientConfig{URL: ts.url, Key: testKey})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	codeTasks := 0
	for _, id := range tasks.IDs() {
		task, err := tasks.Build(id + "@2")
		if err != nil {
			t.Fatal(err)
		}
		if task.Kind != tasks.KindCode {
			continue
		}
		codeTasks++
		wantIn, _ := local.HiddenInputs(ctx, task.TaskID)
		gotIn, err := c.HiddenInputs(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		wantJSON, _ := json.Marshal(wantIn)
		gotJSON, _ := json.Marshal(gotIn)
		if string(wantJSON) != string(gotJSON) {
			t.Errorf("%s: hidden inputs differ:\n got %s\nwant %s", task.TaskID, gotJSON, wantJSON)
		}
		right := make([]episode.Output, len(task.Key.Hidden))
		none := make([]episode.Output, len(task.Key.Hidden))
		half := make([]episode.Output, len(task.Key.Hidden))
		for i, h := range task.Key.Hidden {
			b, _ := json.Marshal(h.Want)
			right[i] = episode.Output{Value: b}
			if i%2 == 0 {
				half[i] = right[i]
			} else {
				half[i] = episode.Output{Value: []byte(`"not it"`)}
			}
		}
		allPass := make([]bool, len(task.Visible))
		for i := range allPass {
			allPass[i] = true
		}
		oneFails := append([]bool(nil), allPass...)
		oneFails[0] = false
		for _, tc := range []struct {
			name    string
			visible []bool
			hidden  []episode.Output
		}{
			{"right", allPass, right}, {"none", allPass, none}, {"half", allPass, half}, {"example_fails", oneFails, right},
		} {
			wc, wr, werr := local.Judge(ctx, task.TaskID, tc.visible, tc.hidden)
			gc, gr, gerr := c.Judge(ctx, task.TaskID, tc.visible, tc.hidden)
			if werr != nil || gerr != nil || wc != gc || wr != gr {
				t.Errorf("%s %s: remote (%v, %q, %v), local (%v, %q, %v)", task.TaskID, tc.name, gc, gr, gerr, wc, wr, werr)
			}
		}
	}
	if codeTasks == 0 {
		t.Fatal("no code task in the catalogue")
	}
}

// requestCases are refused requests: each is decoded or checked before any
// grading, and the status, code and that the reply repeats nothing of the
// body are checked. They seed FuzzDecodeRequest too.
var requestCases = []struct {
	name, route, body string
	status            int
	code              string
	builds            bool // whether the refusal comes after building the task
}{
	{name: "unknown_task", route: RouteScore, body: `{"task_id":"nope/canary","answer":"x"}`, status: 404, code: "unknown_task", builds: true},
	{name: "bad_variant", route: RouteCases, body: `{"task_id":"software/median@canary"}`, status: 404, code: "unknown_task", builds: true},
	{name: "variant_too_big", route: RouteCases, body: `{"task_id":"software/median@100000"}`, status: 404, code: "unknown_task", builds: true},
	{name: "score_code_task", route: RouteScore, body: `{"task_id":"software/median","answer":"canary"}`, status: 422, code: "wrong_kind", builds: true},
	{name: "cases_answer_task", route: RouteCases, body: `{"task_id":"logs/error_count"}`, status: 422, code: "wrong_kind", builds: true},
	{name: "judge_answer_task", route: RouteJudge, body: `{"task_id":"logs/error_count","visible_passed":[],"hidden":[]}`, status: 422, code: "wrong_kind", builds: true},
	{name: "judge_few_outputs", route: RouteJudge, body: `{"task_id":"software/median","visible_passed":[true,true,true],"hidden":[{"value":"canary"}]}`, status: 422, code: "invalid_request", builds: true},
	{name: "judge_few_visible", route: RouteJudge, body: `{"task_id":"software/median","visible_passed":[true],"hidden":[{},{},{},{},{},{}]}`, status: 422, code: "invalid_request", builds: true},
	{name: "not_json", route: RouteScore, body: `{"task_id":"canary`, status: 400, code: "invalid_json"},
	{name: "empty_body", route: RouteCases, body: ``, status: 400, code: "invalid_json"},
	{name: "array_body", route: RouteCases, body: `["canary"]`, status: 422, code: "invalid_request"},
	{name: "missing_task_id", route: RouteCases, body: `{}`, status: 422, code: "invalid_request"},
	{name: "missing_answer", route: RouteScore, body: `{"task_id":"logs/error_count"}`, status: 422, code: "invalid_request"},
	{name: "missing_hidden", route: RouteJudge, body: `{"task_id":"software/median","visible_passed":[]}`, status: 422, code: "invalid_request"},
	{name: "null_hidden", route: RouteJudge, body: `{"task_id":"software/median","visible_passed":[],"hidden":null}`, status: 422, code: "invalid_request"},
	{name: "unknown_field", route: RouteCases, body: `{"task_id":"software/median","canary":1}`, status: 422, code: "invalid_request"},
	{name: "nested_unknown_field", route: RouteJudge, body: `{"task_id":"software/median","visible_passed":[],"hidden":[{"canary":1}]}`, status: 422, code: "invalid_request"},
	{name: "duplicate_field", route: RouteCases, body: `{"task_id":"software/median","task_id":"canary/x"}`, status: 422, code: "invalid_request"},
	{name: "task_id_number", route: RouteCases, body: `{"task_id":12345}`, status: 422, code: "invalid_request"},
	{name: "answer_object", route: RouteScore, body: `{"task_id":"logs/error_count","answer":{"canary":1}}`, status: 422, code: "invalid_request"},
	{name: "visible_strings", route: RouteJudge, body: `{"task_id":"software/median","visible_passed":["canary"],"hidden":[]}`, status: 422, code: "invalid_request"},
	{name: "task_id_bad_chars", route: RouteCases, body: `{"task_id":"../canary\n"}`, status: 422, code: "invalid_request"},
	{name: "task_id_too_long", route: RouteCases, body: `{"task_id":"` + strings.Repeat("a", 201) + `"}`, status: 422, code: "invalid_request"},
	{name: "bad_utf8", route: RouteScore, body: "{\"task_id\":\"logs/error_count\",\"answer\":\"canary\xff\xfe\"}", status: 422, code: "invalid_request"},
	{name: "trailing_value", route: RouteCases, body: `{"task_id":"software/median"} {"canary":1}`, status: 400, code: "invalid_json"},
	{name: "deep_nesting", route: RouteJudge, body: `{"task_id":"software/median","visible_passed":[],"hidden":[{"value":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}]}`, status: 400, code: "invalid_json"},
	{name: "huge_float_in_int_field", route: RouteJudge, body: `{"task_id":"software/median","visible_passed":[1e999999999],"hidden":[]}`, status: 422, code: "invalid_request"},
}

// TestRequestsRefused: malformed and hostile bodies are refused with a
// clear status and code, the reply repeats nothing of the body, and a
// request refused before its task is built builds none.
func TestRequestsRefused(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testKey)
	for _, tt := range requestCases {
		t.Run(tt.name, func(t *testing.T) {
			before := ts.cat.builds.Load()
			r := do(t, http.MethodPost, ts.url+tt.route, tt.body, KeyHeader+": "+testKey)
			var e apiError
			if err := json.Unmarshal([]byte(r.body), &e); err != nil || r.status != tt.status || e.Code != tt.code {
				t.Fatalf("got %d %q, want %d code %s", r.status, r.body, tt.status, tt.code)
			}
			if strings.Contains(r.body, "canary") {
				t.Errorf("reply repeats the request: %q", r.body)
			}
			builds := ts.cat.builds.Load() - before
			if (builds != 0) != tt.builds {
				t.Errorf("built %d tasks; want a build: %v", builds, tt.builds)
			}
		})
	}
}

// TestHostileValues: a body just over MaxBodyBytes is refused with 413,
// and hidden outputs with huge numbers or deep (but legal) nesting are
// judged quickly, with no credit.
func TestHostileValues(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testKey)
	big := `{"task_id":"logs/error_count","answer":"` + strings.Repeat("a", MaxBodyBytes) + `"}`
	if r := do(t, http.MethodPost, ts.url+RouteScore, big, KeyHeader+": "+testKey); r.status != http.StatusRequestEntityTooLarge {
		t.Errorf("body over MaxBodyBytes: %d %q", r.status, r.body)
	}
	values := []string{"1e999999999", "-1e-999999999", strings.Repeat("9", 100000), strings.Repeat("[", 9000) + strings.Repeat("]", 9000), `"` + strings.Repeat("\\u0000", 10000) + `"`}
	// The control: plain strings of the same lengths, the same body size.
	judge := func(values []string) (verdict, reply, time.Duration) {
		var hidden []string
		for i := 0; i < 6; i++ {
			hidden = append(hidden, `{"value":`+values[i%len(values)]+`}`)
		}
		body := `{"task_id":"software/median","visible_passed":[true,true,true],"hidden":[` + strings.Join(hidden, ",") + `]}`
		start := time.Now()
		r := do(t, http.MethodPost, ts.url+RouteJudge, body, KeyHeader+": "+testKey)
		took := time.Since(start)
		var v verdict
		if err := json.Unmarshal([]byte(r.body), &v); err != nil || r.status != 200 {
			t.Fatalf("judge: %d %q, want 200", r.status, r.body)
		}
		return v, r, took
	}
	var plain []string
	for _, v := range values {
		plain = append(plain, `"`+strings.Repeat("a", len(v)-2)+`"`)
	}
	_, _, before := judge(plain)
	v, r, hostile := judge(values)
	_, _, after := judge(plain)
	if v.Credit != 0 {
		t.Errorf("hostile outputs: %q, want credit 0", r.body)
	}
	// No value costs out of proportion to its size: judging them takes at
	// most ten times the slower of the two controls around it, measured
	// on the same machine in the same load, plus 1 s for a stall.
	if limit := 10*max(before, after) + time.Second; hostile > limit {
		t.Errorf("hostile outputs took %v to judge; plain values of the same sizes %v and %v (limit %v)", hostile, before, after, limit)
	}
}

// TestKeyNeverInRepliesOrLogs is the canary test: a full run of the
// service (public routes, every protected route graded, refused with
// missing and wrong keys, malformed bodies, unknown paths that carry the
// key, and a Client's calls) never puts the key, or a wrong key it was
// sent, into any reply (status line, headers, body) or any log line.
func TestKeyNeverInRepliesOrLogs(t *testing.T) {
	t.Parallel()
	const key = "CANARY-key-3b8e71f0a9c24d6e"
	const wrongKey = "CANARY-wrong-5d2c9e0f"
	ts := newTestServer(t, key)
	var replies []string
	record := func(r reply) {
		var h strings.Builder
		r.header.Write(&h)
		replies = append(replies, fmt.Sprint(r.status)+"\n"+h.String()+"\n"+r.body)
	}
	auth := KeyHeader + ": " + key
	for route, body := range validBodies {
		record(do(t, http.MethodPost, ts.url+route, body, auth))
		record(do(t, http.MethodPost, ts.url+route, body))
		record(do(t, http.MethodPost, ts.url+route, body, KeyHeader+": "+wrongKey))
		record(do(t, http.MethodPost, ts.url+route, `{"task_id":"`+key+`"}`, auth))
		record(do(t, http.MethodPost, ts.url+route, `{"task_id":"x","answer":"`+key+`","`+key+`":1}`, auth))
		record(do(t, http.MethodPost, ts.url+route+"?key="+key, body, KeyHeader+": "+wrongKey))
	}
	for _, tt := range requestCases {
		record(do(t, http.MethodPost, ts.url+tt.route, tt.body, auth))
	}
	record(do(t, http.MethodGet, ts.url+RouteHealth, ""))
	record(do(t, http.MethodGet, ts.url+RouteDocs, "", auth))
	record(do(t, http.MethodGet, ts.url+"/"+key, "", auth))
	record(do(t, http.MethodPost, ts.url+"/v1/"+key+"/score", "", KeyHeader+": "+wrongKey))

	rec := &recorder{next: http.DefaultTransport}
	clientLogs := &testlog.Buffer{}
	for _, k := range []string{key, wrongKey} {
		c, err := NewClient(ClientConfig{URL: ts.url, Key: k, Transport: rec, Logger: newJSONLogger(clientLogs)})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		_, _, err1 := c.ScoreAnswer(ctx, "logs/error_count", "7")
		_, err2 := c.HiddenInputs(ctx, "software/median")
		_, _, err3 := c.Judge(ctx, "software/median", []bool{true, true, true}, make([]episode.Output, 6))
		for _, err := range []error{err1, err2, err3} {
			if (err != nil) != (k == wrongKey) {
				t.Errorf("client with key %s: %v", k, err)
			}
			if err != nil {
				replies = append(replies, err.Error())
			}
		}
	}
	replies = append(replies, rec.all())
	if len(replies) < 40 {
		t.Fatalf("only %d replies recorded", len(replies))
	}
	logs := ts.logs.String() + clientLogs.String()
	if strings.Count(logs, "\n") < 40 {
		t.Fatalf("only %d log lines; is the logger wired?", strings.Count(logs, "\n"))
	}
	for _, secret := range []string{key, wrongKey, "CANARY"} {
		for i, r := range replies {
			if strings.Contains(r, secret) {
				t.Errorf("reply %d holds %q:\n%s", i, secret, r)
			}
		}
		for _, line := range strings.Split(logs, "\n") {
			if strings.Contains(line, secret) {
				t.Errorf("log line holds %q: %s", secret, line)
			}
		}
	}
}
