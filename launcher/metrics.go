package launcher

import (
	"net/http"
	"strconv"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/workbench/results"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the service's Prometheus series, on a registry of its own
// (never the client library's global one).
type metrics struct {
	reg         *prometheus.Registry
	campaigns   prometheus.Gauge
	workspaces  prometheus.Gauge
	bringUp     *prometheus.HistogramVec
	cleanup     *prometheus.HistogramVec
	episodes    prometheus.Gauge
	proxyErrors *prometheus.CounterVec
	requests    *prometheus.CounterVec
	// results are the episode results collected, by how each ended, and
	// their rewards; refused the lines of workspaces' results files
	// refused.
	results *prometheus.CounterVec
	rewards prometheus.Histogram
	refused prometheus.Counter
	// runs are the runs of those episodes' code by why each stopped
	// (results.StopTerms), inferred marking the stops named from
	// evidence.
	runs *prometheus.CounterVec
}

// Proxy error kinds (the kind label of agentpen_proxy_errors_total).
const (
	errKindUnknown     = "unknown_capability" // a capability that names no live workspace
	errKindDial        = "dial"               // the workspace's socket did not answer
	errKindBackendLost = "backend_lost"       // the workspace went away mid-session or mid-request
	errKindRevoked     = "revoked"            // the workspace was removed while in use
	errKindBadRequest  = "bad_request"        // a body over the limit or unreadable
	errKindRefused     = "answer_refused"     // a workspace's answer the route does not relay (relayAnswer)
)

func newMetrics() *metrics {
	durations := []float64{0.5, 1, 2, 4, 8, 15, 30, 60, 120}
	m := &metrics{
		reg: prometheus.NewRegistry(),
		campaigns: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "agentpen_campaigns", Help: "Campaigns whose workspaces this service serves (ready), or that it is creating or deleting.",
		}),
		workspaces: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "agentpen_workspaces", Help: "Workspaces of ready campaigns reachable through the episode proxy.",
		}),
		bringUp: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "agentpen_bringup_duration_seconds", Help: "Campaign creation through the API: bring-up and attestation.", Buckets: durations,
		}, []string{"outcome"}),
		cleanup: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "agentpen_cleanup_duration_seconds", Help: "Campaign removal through the API, by cleanup status.", Buckets: durations,
		}, []string{"status"}),
		episodes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "agentpen_live_episodes", Help: "WebSocket episode sessions being relayed by the proxy.",
		}),
		proxyErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentpen_proxy_errors_total", Help: "Episode proxy failures by kind.",
		}, []string{"kind"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentpen_http_requests_total", Help: "HTTP requests by route pattern and status code.",
		}, []string{"route", "code"}),
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentpen_episode_results_total", Help: "Episode results collected from the workspaces, by how the episode ended.",
		}, []string{"end"}),
		rewards: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "agentpen_episode_reward", Help: "Rewards of the episode results collected.", Buckets: []float64{0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1},
		}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentpen_episode_runs_total", Help: "Runs of the collected episodes' code (the agent's, its tests', graded cases) by why each stopped; inferred=\"true\": named from the evidence in its error output (memory, processes), not observed.",
		}, []string{"stop", "inferred"}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "agentpen_episode_results_refused_total", Help: "Lines of workspaces' results files refused (malformed, oversized, of another task) or files refused (a link, not a regular file).",
		}),
	}
	m.reg.MustRegister(m.campaigns, m.workspaces, m.bringUp, m.cleanup, m.episodes, m.proxyErrors, m.requests, m.results, m.rewards, m.refused, m.runs,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, k := range []string{errKindUnknown, errKindDial, errKindBackendLost, errKindRevoked, errKindBadRequest} {
		m.proxyErrors.WithLabelValues(k)
	}
	for _, e := range results.Ends {
		m.results.WithLabelValues(e)
	}
	for i := range results.StopTerms {
		m.runsOf(results.Stop(i))
	}
	return m
}

// collected counts what one collection of results stored and refused.
func (m *metrics) collected(c adapter.Collected) {
	for _, r := range c.Records {
		m.results.WithLabelValues(r.End).Inc()
		m.rewards.Observe(r.Reward)
		r.Runs.Each(func(s results.Stop, n int) { m.runsOf(s).Add(float64(n)) })
	}
	m.refused.Add(float64(len(c.Refused)))
}

// runsOf is the counter of runs stopped for s.
func (m *metrics) runsOf(s results.Stop) prometheus.Counter {
	return m.runs.WithLabelValues(s.String(), strconv.FormatBool(s.Inferred()))
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}
