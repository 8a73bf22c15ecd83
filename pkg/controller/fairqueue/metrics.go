package fairqueue

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// metrics reports the workqueue metrics of one queue; nil reports nothing.
// Its methods are atomics of their own: the queue calls them outside its
// lock, except updateUnfinished, which reads the entries in processing.
type metrics[T comparable] struct {
	depth                   workqueue.GaugeMetric
	adds                    workqueue.CounterMetric
	latency                 workqueue.HistogramMetric
	workDuration            workqueue.HistogramMetric
	unfinishedWorkSeconds   workqueue.SettableGaugeMetric
	longestRunningProcessor workqueue.SettableGaugeMetric
	retries                 workqueue.CounterMetric
}

func newMetrics[T comparable](name string, mp workqueue.MetricsProvider) *metrics[T] {
	if name == "" {
		return nil
	}
	if mp == nil {
		var err error
		if mp, err = controllerRuntimeProvider(); err != nil {
			logf.Log.WithName("fairqueue").Error(err, "Workqueue metrics are not reported", "queue", name)
			return nil
		}
	}
	return &metrics[T]{
		depth:                   mp.NewDepthMetric(name),
		adds:                    mp.NewAddsMetric(name),
		latency:                 mp.NewLatencyMetric(name),
		workDuration:            mp.NewWorkDurationMetric(name),
		unfinishedWorkSeconds:   mp.NewUnfinishedWorkSecondsMetric(name),
		longestRunningProcessor: mp.NewLongestRunningProcessorSecondsMetric(name),
		retries:                 mp.NewRetriesMetric(name),
	}
}

func (m *metrics[T]) add() {
	if m != nil {
		m.adds.Inc()
		m.depth.Inc()
	}
}

// get observes an item handed out after waiting ready for d nanoseconds.
func (m *metrics[T]) get(d int64) {
	if m != nil {
		m.depth.Dec()
		m.latency.Observe(time.Duration(d).Seconds())
	}
}

// done observes the work duration of an item processed for d nanoseconds.
func (m *metrics[T]) done(d int64) {
	if m != nil {
		m.workDuration.Observe(time.Duration(d).Seconds())
	}
}

func (m *metrics[T]) retry() {
	if m != nil {
		m.retries.Inc()
	}
}

func (m *metrics[T]) updateUnfinished(processing []*entry[T], now int64) {
	var total, oldest float64
	for _, e := range processing {
		age := time.Duration(now - e.at).Seconds()
		total += age
		oldest = max(oldest, age)
	}
	m.unfinishedWorkSeconds.Set(total)
	m.longestRunningProcessor.Set(oldest)
}

// controllerRuntimeProvider finds controller-runtime's workqueue metrics in
// its registry, so that a fair queue reports the very series a plain
// controller does. controller-runtime does not export its provider; the
// registry hands out an existing collector to whoever registers an equal one.
var controllerRuntimeProvider = sync.OnceValues(func() (workqueue.MetricsProvider, error) {
	var p crProvider
	var err error
	p.depth, err = existing[*prometheus.GaugeVec](prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: crmetrics.WorkQueueSubsystem, Name: crmetrics.DepthKey,
		Help: "Current depth of workqueue by workqueue and priority",
	}, []string{"name", "controller", "priority"}), err)
	p.adds, err = existing[*prometheus.CounterVec](prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: crmetrics.WorkQueueSubsystem, Name: crmetrics.AddsKey,
		Help: "Total number of adds handled by workqueue",
	}, []string{"name", "controller"}), err)
	p.latency, err = existing[*prometheus.HistogramVec](prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: crmetrics.WorkQueueSubsystem, Name: crmetrics.QueueLatencyKey,
		Help: "How long in seconds an item stays in workqueue before being requested",
	}, []string{"name", "controller"}), err)
	p.workDuration, err = existing[*prometheus.HistogramVec](prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: crmetrics.WorkQueueSubsystem, Name: crmetrics.WorkDurationKey,
		Help: "How long in seconds processing an item from workqueue takes.",
	}, []string{"name", "controller"}), err)
	p.unfinished, err = existing[*prometheus.GaugeVec](prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: crmetrics.WorkQueueSubsystem, Name: crmetrics.UnfinishedWorkKey,
		Help: "How many seconds of work has been done that " +
			"is in progress and hasn't been observed by work_duration. Large " +
			"values indicate stuck threads. One can deduce the number of stuck " +
			"threads by observing the rate at which this increases.",
	}, []string{"name", "controller"}), err)
	p.longest, err = existing[*prometheus.GaugeVec](prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: crmetrics.WorkQueueSubsystem, Name: crmetrics.LongestRunningProcessorKey,
		Help: "How many seconds has the longest running " +
			"processor for workqueue been running.",
	}, []string{"name", "controller"}), err)
	p.retries, err = existing[*prometheus.CounterVec](prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: crmetrics.WorkQueueSubsystem, Name: crmetrics.RetriesKey,
		Help: "Total number of items added to the workqueue with a non-zero delay (rate-limited requeues, explicit RequeueAfter or AddAfter calls)",
	}, []string{"name", "controller"}), err)
	if err != nil {
		return nil, fmt.Errorf("finding controller-runtime's workqueue metrics: %w", err)
	}
	return p, nil
})

// existing returns the collector registered in controller-runtime's registry
// under c's description. It never registers c: if nothing equal is
// registered yet, c is unregistered again and an error returned.
func existing[V prometheus.Collector](c V, prev error) (V, error) {
	var zero V
	if prev != nil {
		return zero, prev
	}
	err := crmetrics.Registry.Register(c)
	if err == nil {
		crmetrics.Registry.Unregister(c)
		return zero, errors.New("controller-runtime has not registered its workqueue metrics")
	}
	var are prometheus.AlreadyRegisteredError
	if !errors.As(err, &are) {
		return zero, err
	}
	v, ok := are.ExistingCollector.(V)
	if !ok {
		return zero, fmt.Errorf("workqueue metric is a %T", are.ExistingCollector)
	}
	return v, nil
}

// crProvider labels the series as controller-runtime does: name and
// controller are the queue's name; depth has an empty priority.
type crProvider struct {
	depth, unfinished, longest *prometheus.GaugeVec
	adds, retries              *prometheus.CounterVec
	latency, workDuration      *prometheus.HistogramVec
}

func (p crProvider) NewDepthMetric(name string) workqueue.GaugeMetric {
	return p.depth.WithLabelValues(name, name, "")
}
func (p crProvider) NewAddsMetric(name string) workqueue.CounterMetric {
	return p.adds.WithLabelValues(name, name)
}
func (p crProvider) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return p.latency.WithLabelValues(name, name)
}
func (p crProvider) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return p.workDuration.WithLabelValues(name, name)
}
func (p crProvider) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.unfinished.WithLabelValues(name, name)
}
func (p crProvider) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.longest.WithLabelValues(name, name)
}
func (p crProvider) NewRetriesMetric(name string) workqueue.CounterMetric {
	return p.retries.WithLabelValues(name, name)
}

var _ workqueue.MetricsProvider = crProvider{}
