package fleet_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
)

// BenchmarkProbe measures one health probe of a cluster over a connection
// that stays open, one after the other, as a probe worker sends it: CPU and
// allocations per probe. The probes of a busy fleet share wake-ups and cost
// less each: bench.BenchmarkProbeCost measures those.
func BenchmarkProbe(b *testing.B) {
	cl, err := cluster.New(members.Config(0))
	if err != nil {
		b.Fatal(err)
	}
	probe, stop := fleet.NewProbe(context.Background(), cl)
	defer stop()
	if err := probe(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for b.Loop() {
		if err := probe(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/probe")
}

// processCPU is the user and system CPU time of the whole process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
