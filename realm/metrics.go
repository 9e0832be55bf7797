package realm

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the node's Prometheus series, on a registry of its own so
// several nodes can live in one process (testnet).
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	features prometheus.Counter
}

func newMetrics(n *Node) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "relay_requests_total", Help: "Operations served, by operation, transport and status.",
		}, []string{"op", "transport", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "relay_request_seconds", Help: "api.Operation latency, by operation and transport.",
			Buckets: prometheus.ExponentialBuckets(0.0002, 2, 16),
		}, []string{"op", "transport"}),
	}
	m.features = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "relay_feature_requests_total", Help: "Feature requests received (the operator is told of each).",
	})
	m.reg.MustRegister(m.requests, m.latency, m.features,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "relay_store_sequence", Help: "The node's corpus sequence (events stored)."},
			func() float64 { return float64(n.store.Sequence()) }),
	)
	return m
}

func (m *metrics) observe(op, transport string, status int, d time.Duration) {
	m.requests.WithLabelValues(op, transport, strconv.Itoa(status)).Inc()
	m.latency.WithLabelValues(op, transport).Observe(d.Seconds())
}
