// Package bench holds the benchmarks of the core runtime against a real API
// server: engagement of many clusters, engage/disengage cycles, event
// throughput beside plain controller-runtime, and queue drain rate. They print
// figures (b.ReportMetric); nothing is asserted on time. Run them with
// `make bench` or `go test -run '^$' -bench . ./bench/`.
package bench
