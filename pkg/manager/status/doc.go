// Package status serves the fleet's status endpoint: one read-only document
// listing each cluster this replica knows, with its state and since when,
// whether it is paused, which replica owns it under sharding, its last
// health probe (result and latency) and its last error, redacted.
//
// The Multi-Cluster Manager serves it at /clusters (DefaultPath; see
// mcmanager.WithStatusEndpoint) on the metrics server's listener:
// controller-runtime's manager serves /readyz and /healthz on a listener of
// its own that takes no other path, while its metrics server takes extra
// handlers (manager.AddMetricsServerExtraHandler) and puts them behind the
// same authentication filter as /metrics, when one is configured. A
// program can also mount NewHandler on a server of its own.
//
// # Queries
//
//	GET /clusters                       the first 500 clusters, JSON, sorted by name
//	GET /clusters?limit=100             at most 100 (1 to 5000)
//	GET /clusters?continue=<name>       the clusters after <name>: the document's continue
//	GET /clusters?state=disconnected    only clusters in these states (comma separated)
//	GET /clusters?format=text           one line per cluster, aligned columns; so does Accept: text/plain
//
// A walk from page to page (passing each page's continue to the next)
// lists every cluster known throughout the walk exactly once: pages are cut
// by name, not by position. A query the endpoint does not understand (an
// unknown parameter, a limit out of range, an unknown state or format) is
// answered 400 with a line that says what is wrong.
//
// A page reads the engine's records without its lock (fleet.Engine.List):
// serving the endpoint never delays the engine, however large the fleet.
package status
