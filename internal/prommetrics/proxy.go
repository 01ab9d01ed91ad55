package prommetrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sharestate/sharestate-operator/internal/metricsreg"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire/serve"
)

// proxyMetrics are a Proxy's metrics. The api label takes Kafka's API names ("Unknown" for a key
// kmsg does not know), so its values are bounded.
type proxyMetrics struct {
	requestsTotal      *prometheus.CounterVec
	upstreamDialErrors prometheus.Counter
	connectionsOpen    prometheus.Gauge
	connectionsClosed  *prometheus.CounterVec
	inFlight           prometheus.Gauge
	bytesToUpstream    prometheus.Counter
	bytesFromUpstream  prometheus.Counter
	// upstreamRedials counts upstream connections dialled again after one ended with nothing owed.
	upstreamRedials prometheus.Counter
	// upstreamIdleEnds counts upstreams that ended with nothing owed, their downstream kept open.
	upstreamIdleEnds       prometheus.Counter
	apiVersionsUnrewritten *prometheus.CounterVec

	// counters caches requestsTotal's children by route and key: the per-request cost is a map read.
	counters sync.Map // counterKey -> prometheus.Counter
}

type counterKey struct {
	key   int16
	route string
}

var _ serve.ProxyObserver = (*proxyMetrics)(nil)

// NewProxyObserver returns a proxy's observer whose metrics are registered on reg.
func NewProxyObserver(reg prometheus.Registerer) (serve.ProxyObserver, error) {
	bytes := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sharestate_proxy_forwarded_bytes_total",
		Help: "Bytes of forwarded requests and of the upstream's responses, by direction.",
	}, []string{"direction"})
	m := &proxyMetrics{
		requestsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sharestate_proxy_requests_total",
			Help: "Requests through the proxy, by API and route: forwarded to the upstream, or answered by the proxy.",
		}, []string{"api", "route"}),
		upstreamDialErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sharestate_proxy_upstream_dial_errors_total",
			Help: "Failed connections to the upstream; each closed the downstream connection that needed it.",
		}),
		connectionsOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sharestate_proxy_connections",
			Help: "Open downstream connections (each with its upstream connection).",
		}),
		connectionsClosed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sharestate_proxy_connections_closed_total",
			Help: "Downstream connections closed, by reason.",
		}, []string{"reason"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sharestate_proxy_requests_in_flight",
			Help: "Requests read and not yet responded to, over all connections.",
		}),
		upstreamIdleEnds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sharestate_proxy_upstream_idle_ends_total",
			Help: "Upstream connections that ended with nothing owed while their downstream stayed open (a broker closes an inter-broker connection idle for connections.max.idle.ms; on a persister's connection the upstream carries nothing).",
		}),
		upstreamRedials: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sharestate_proxy_upstream_redials_total",
			Help: "Upstream connections dialled again for a forwarded request, the last having ended with nothing owed.",
		}),
		apiVersionsUnrewritten: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sharestate_proxy_apiversions_unrewritten_total",
			Help: "Upstream ApiVersions responses forwarded without the share-state versions served here, by reason: " +
				"undecodable, or error_response (such as KIP-511's fallback, which the client retries).",
		}, []string{"reason"}),
	}
	var err error
	metricsreg.Into(reg, &err, &bytes)
	metricsreg.Into(reg, &err, &m.requestsTotal)
	metricsreg.Into(reg, &err, &m.upstreamDialErrors)
	metricsreg.Into(reg, &err, &m.connectionsOpen)
	metricsreg.Into(reg, &err, &m.connectionsClosed)
	metricsreg.Into(reg, &err, &m.inFlight)
	metricsreg.Into(reg, &err, &m.upstreamRedials)
	metricsreg.Into(reg, &err, &m.upstreamIdleEnds)
	metricsreg.Into(reg, &err, &m.apiVersionsUnrewritten)
	m.bytesToUpstream = bytes.WithLabelValues("request")
	m.bytesFromUpstream = bytes.WithLabelValues("response")
	return m, err
}

// Request counts a request by API key and route.
func (m *proxyMetrics) Request(key int16, route string) {
	k := counterKey{key, route}
	if c, ok := m.counters.Load(k); ok {
		c.(prometheus.Counter).Inc()
		return
	}
	c := m.requestsTotal.WithLabelValues(kmsg.NameForKey(key), route)
	m.counters.Store(k, c)
	c.Inc()
}

func (m *proxyMetrics) ConnectionOpened() { m.connectionsOpen.Inc() }

func (m *proxyMetrics) ConnectionClosed(reason string) {
	m.connectionsOpen.Dec()
	m.connectionsClosed.WithLabelValues(reason).Inc()
}

func (m *proxyMetrics) RequestRead()              { m.inFlight.Inc() }
func (m *proxyMetrics) RequestWritten()           { m.inFlight.Dec() }
func (m *proxyMetrics) BytesToUpstream(n int64)   { m.bytesToUpstream.Add(float64(n)) }
func (m *proxyMetrics) BytesFromUpstream(n int64) { m.bytesFromUpstream.Add(float64(n)) }
func (m *proxyMetrics) UpstreamDialFailed()       { m.upstreamDialErrors.Inc() }
func (m *proxyMetrics) UpstreamIdleEnded()        { m.upstreamIdleEnds.Inc() }
func (m *proxyMetrics) UpstreamRedialed()         { m.upstreamRedials.Inc() }
func (m *proxyMetrics) APIVersionsUnrewritten(reason string) {
	m.apiVersionsUnrewritten.WithLabelValues(reason).Inc()
}
