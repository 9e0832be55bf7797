package realm

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"relay/federation"
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

// federationCollector reads the federation's state at each scrape.
type federationCollector struct {
	fed                                                    *federation.Service
	peers, head, lag, parked, received, refused, published *prometheus.Desc
}

func newFederationCollector(f *federation.Service) *federationCollector {
	return &federationCollector{fed: f,
		peers:     prometheus.NewDesc("relay_federation_peers", "Peers by connection state.", []string{"state"}, nil),
		head:      prometheus.NewDesc("relay_federation_realm_head", "The newest seq held of each realm.", []string{"realm"}, nil),
		lag:       prometheus.NewDesc("relay_federation_realm_lag", "Events of each realm seen at a peer and not yet held.", []string{"realm"}, nil),
		parked:    prometheus.NewDesc("relay_federation_realm_parked", "Events of each realm held but not shown yet: each waits for a record not held here.", []string{"realm"}, nil),
		received:  prometheus.NewDesc("relay_federation_received_total", "Events stored from peers, by way (gossip, catchup).", []string{"way"}, nil),
		refused:   prometheus.NewDesc("relay_federation_refused_total", "Events and requests from peers refused, by cause.", []string{"cause"}, nil),
		published: prometheus.NewDesc("relay_federation_published_total", "Own events sent on the realm's topic.", nil, nil),
	}
}

func (c *federationCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.peers, c.head, c.lag, c.parked, c.received, c.refused, c.published} {
		ch <- d
	}
}

func (c *federationCollector) Collect(ch chan<- prometheus.Metric) {
	states := map[string]int{"connected": 0, "dialing": 0, "backoff": 0, "idle": 0}
	for _, p := range c.fed.Peers() {
		states[p.State]++
	}
	for s, k := range states {
		ch <- prometheus.MustNewConstMetric(c.peers, prometheus.GaugeValue, float64(k), s)
	}
	if rs, err := c.fed.Realms(); err == nil {
		for _, r := range rs {
			ch <- prometheus.MustNewConstMetric(c.head, prometheus.GaugeValue, float64(r.Seq), r.Realm)
			ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(r.Lag), r.Realm)
			ch <- prometheus.MustNewConstMetric(c.parked, prometheus.GaugeValue, float64(r.Parked), r.Realm)
		}
	}
	cs := c.fed.Counters()
	for w, v := range cs.Received {
		ch <- prometheus.MustNewConstMetric(c.received, prometheus.CounterValue, float64(v), w)
	}
	for w, v := range cs.Refused {
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(v), w)
	}
	ch <- prometheus.MustNewConstMetric(c.published, prometheus.CounterValue, float64(cs.Published))
}
