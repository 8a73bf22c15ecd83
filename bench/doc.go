// Package bench holds the benchmarks of the core runtime against a real API
// server: engagement of many clusters, fleet-wide reads and aggregation
// beside the hand-written loop over GetCluster, engage/disengage cycles, event
// throughput beside plain controller-runtime, the CPU per reconcile and the
// drain rate with 1, 8 and 16 workers beside plain controller-runtime, the
// CPU per informer event, the fair queue's starvation latency and memory per
// queued request, and 1,000 to 10,000 clusters beside bare client-go
// informers (BenchmarkScale, skipped by -short). They print figures
// (b.ReportMetric); nothing is asserted on time. Where a reference exists it
// is measured in the same process and printed on a line of its own beside
// the figure. Run them with `make bench` or `go test -run '^$' -bench .
// ./bench/`.
package bench
