package fleettest

import (
	"testing"

	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metric reads the series of the metric name in controller-runtime's
// registry (where the library registers its metrics) that carry every label
// of labels: it returns how many there are and the sum of their values
// (counters and gauges).
func Metric(t testing.TB, name string, labels map[string]string) (sum float64, series int) {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatalf("gathering metrics: %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			for key, want := range labels {
				found := false
				for _, l := range m.GetLabel() {
					if l.GetName() == key && l.GetValue() == want {
						found = true
						break
					}
				}
				if !found {
					continue metrics
				}
			}
			series++
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum, series
}
