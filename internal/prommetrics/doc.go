// Package prommetrics is the binaries' Prometheus metrics of the library's observers: the
// persister's (sharestate_persister_*), the share-state server's (sharestate_sidecar_*) and the
// proxy's (sharestate_proxy_*). The library reports through small interfaces (persister.Observer,
// serve.ServerObserver, serve.ProxyObserver) and links no Prometheus; the names and labels,
// which users' dashboards and alerts read, are written here once.
//
// Each constructor registers its metrics on the registry it is given; observers made on one
// registry (the operator keeps a persister per namespace) share the metrics already registered.
package prommetrics
