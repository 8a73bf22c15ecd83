// Package bench holds the benchmarks of the core runtime against a real API
// server: engagement of many clusters, fleet-wide reads and aggregation
// beside the hand-written loop over GetCluster, engage/disengage cycles, event
// throughput beside plain controller-runtime, queue drain rate with 1 and 8
// workers beside plain controller-runtime, and the fair queue's starvation
// latency, memory per queued request and per-event cost. They print
// figures (b.ReportMetric); nothing is asserted on time. Run them with
// `make bench` or `go test -run '^$' -bench . ./bench/`.
package bench
