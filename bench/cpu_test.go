package bench

import (
	"syscall"
	"testing"
	"time"
)

// processCPU is the user and system CPU time of the whole process so far.
// Measured over a window, it counts every goroutine's work, the queue's and
// informers' included, and is not inflated by other processes on a shared
// machine the way wall-clock rates are.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// figure is one reported value and its unit.
type figure struct {
	value float64
	unit  string
}

// report prints figures measured in the parent benchmark as a line of their
// own, named parent/kind, so that each kind's figure is plotted beside its
// reference under the same unit (hack/benchplot draws one bar per line).
func report(b *testing.B, kind string, figures ...figure) {
	b.Run(kind, func(b *testing.B) {
		for _, f := range figures {
			b.ReportMetric(f.value, f.unit)
		}
	})
}
