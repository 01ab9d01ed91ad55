// Package bench measures how fast share-partition state can be written to the Kubernetes API: it
// starts one envtest control plane, runs each scenario (a raw status update, a naive read-modify-write
// persister, and persister.Persister at several concurrencies) for a fixed window, and reports write
// throughput, latency percentiles and API requests per write, with the project's throughput targets
// checked as ratios within the run. `make bench` runs it through hack/bench.
package bench
