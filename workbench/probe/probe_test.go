package probe

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	var otherHits atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		otherHits.Add(1)
		w.Write([]byte("stolen " + r.Header.Get("X-API-Key")))
	}))
	defer other.Close()
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(`{"status":"healthy"}`)) })
	mux.HandleFunc("/empty", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) })
	mux.HandleFunc("/missing", http.NotFound)
	mux.HandleFunc("/boom", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(500) })
	mux.HandleFunc("/keyed", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-API-Key") != "s3cret" || r.Method != http.MethodPost {
			w.WriteHeader(401)
		}
	})
	mux.HandleFunc("/here", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/health", http.StatusFound) })
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, other.URL+"/x", http.StatusFound) })
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop", http.StatusFound) })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // never answers: the client's timeout ends it
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := "http://" + ln.Addr().String() + "/health"
	ln.Close()

	for _, tt := range []struct {
		name    string
		cfg     Config
		status  int
		ok      bool
		errPart string
	}{
		{name: "ok_any_2xx", cfg: Config{URL: srv.URL + "/health"}, status: 200, ok: true},
		{name: "204_expected", cfg: Config{URL: srv.URL + "/empty", Expect: []int{200, 204}}, status: 204, ok: true},
		{name: "204_not_expected", cfg: Config{URL: srv.URL + "/empty", Expect: []int{200}}, status: 204, errPart: "status 204, want 200"},
		{name: "404", cfg: Config{URL: srv.URL + "/missing"}, status: 404, errPart: "status 404, want 2xx"},
		{name: "500_expected", cfg: Config{URL: srv.URL + "/boom", Expect: []int{500}}, status: 500, ok: true},
		{name: "post_with_key", cfg: Config{URL: srv.URL + "/keyed", Method: "POST", Header: http.Header{"X-Api-Key": {"s3cret"}}}, status: 200, ok: true},
		{name: "get_with_key_wrong_method", cfg: Config{URL: srv.URL + "/keyed", Header: http.Header{"X-Api-Key": {"s3cret"}}}, status: 401, errPart: "status 401"},
		{name: "same_host_redirect", cfg: Config{URL: srv.URL + "/here"}, status: 200, ok: true},
		{name: "other_host_redirect", cfg: Config{URL: srv.URL + "/away", Header: http.Header{"X-Api-Key": {"s3cret"}}, Expect: []int{200, 302}}, status: 302, errPart: "not followed (another host)"},
		{name: "redirect_loop", cfg: Config{URL: srv.URL + "/loop"}, errPart: "more than 5 redirects"},
		{name: "refused", cfg: Config{URL: closed}, errPart: "connection refused"},
		{name: "timeout", cfg: Config{URL: srv.URL + "/slow", Timeout: 100 * time.Millisecond}, errPart: "no reply within 100ms"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// Only "timeout" is meant to reach its timeout; the others get
			// one load cannot overrun instead of DefaultTimeout.
			if tt.cfg.Timeout == 0 {
				tt.cfg.Timeout = time.Hour
			}
			res, err := Check(context.Background(), tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tt.status || res.OK != tt.ok || (tt.errPart == "") != (res.Error == "") || !strings.Contains(res.Error, tt.errPart) {
				t.Fatalf("got %+v, want status %d ok %v error containing %q", res, tt.status, tt.ok, tt.errPart)
			}
			if res.LatencyMS <= 0 || res.Method == "" || res.URL != tt.cfg.URL {
				t.Errorf("result fields: %+v", res)
			}
			if strings.Contains(res.Error, "s3cret") {
				t.Errorf("error holds the header value: %q", res.Error)
			}
		})
	}
	if n := otherHits.Load(); n != 0 {
		t.Errorf("the other host got %d requests", n)
	}
}

func TestCheckInvalid(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		cfg  Config
	}{
		{name: "no_url", cfg: Config{}},
		{name: "ftp", cfg: Config{URL: "ftp://x/"}},
		{name: "no_host", cfg: Config{URL: "http:///x"}},
		{name: "bad_method", cfg: Config{URL: "http://x/", Method: "DELETE"}},
		{name: "bad_status", cfg: Config{URL: "http://x/", Expect: []int{42}}},
		{name: "negative_timeout", cfg: Config{URL: "http://x/", Timeout: -time.Second}},
		{name: "bad_header_name", cfg: Config{URL: "http://x/", Header: http.Header{"X Bad": {"v"}}}},
		{name: "header_value_newline", cfg: Config{URL: "http://x/", Header: http.Header{"X-Api-Key": {"s3cret\r\nX-Other: 1"}}}},
		{name: "password_redacted", cfg: Config{URL: "gopher://u:s3cret@x/"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Check(context.Background(), tt.cfg)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error holds a secret: %v", err)
			}
		})
	}
}
