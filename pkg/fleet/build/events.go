package build

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/mcruntime/multicluster-runtime/internal/metrics"
)

// recorders makes a cluster's event recorders, as controller-runtime's
// cluster does, except that the broadcasters, their goroutines and the
// clients that write Events are made when a recorder first records, not when
// the cluster is built: most members of a large fleet never record one.
// Once the cluster stopped, recorded Events are dropped: logged once,
// counted in multicluster_dropped_requests_total{controller="event-recorder"}.
type recorders struct {
	config     *rest.Config
	httpClient *http.Client
	scheme     *runtime.Scheme
	log        logr.Logger
	// given is Options.EventBroadcaster: the application's, for the old
	// events API; it is never shut down here.
	given record.EventBroadcaster

	mu      sync.RWMutex
	started bool
	stopped bool
	err     error // why the broadcasters could not be made
	legacyB record.EventBroadcaster
	eventsB events.EventBroadcaster
	cancel  context.CancelFunc
	stopLog func()
	warned  bool // a drop was logged
}

// legacy returns a recorder for the old events API (core/v1 Events).
func (r *recorders) legacy(name string) record.EventRecorder {
	return &legacyRecorder{rs: r, name: name}
}

// recorder returns a recorder for events.k8s.io/v1 Events.
func (r *recorders) recorder(name string) recorder.EventRecorder {
	return &eventsRecorder{rs: r, name: name}
}

// with runs record with the started broadcasters, under the read lock so
// that stop waits for it; or counts and drops the Event.
func (r *recorders) with(record func(legacy record.EventBroadcaster, evts events.EventBroadcaster)) {
	r.start()
	r.mu.RLock()
	if !r.stopped && r.err == nil {
		record(r.legacyB, r.eventsB)
		r.mu.RUnlock()
		return
	}
	stopped, err := r.stopped, r.err
	r.mu.RUnlock()
	reason := "cluster-stopped"
	if !stopped {
		reason = "recorder-failed"
	}
	metrics.DroppedRequests.WithLabelValues("event-recorder", reason).Inc()
	r.mu.Lock()
	warn := !r.warned
	r.warned = true
	r.mu.Unlock()
	if warn {
		if stopped {
			r.log.Info("Dropping Events recorded after the cluster stopped (logged once)")
		} else {
			r.log.Error(err, "Dropping Events: the cluster's event recorder could not be made (logged once)")
		}
	}
}

// start makes and starts the broadcasters, once.
func (r *recorders) start() {
	r.mu.RLock()
	started := r.started
	r.mu.RUnlock()
	if started {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started || r.stopped {
		return
	}
	r.started = true
	core, err := corev1client.NewForConfigAndClient(r.config, r.httpClient)
	if err != nil {
		r.err = fmt.Errorf("creating the core/v1 Events client: %w", err)
		return
	}
	evts, err := eventsv1client.NewForConfigAndClient(r.config, r.httpClient)
	if err != nil {
		r.err = fmt.Errorf("creating the events.k8s.io/v1 client: %w", err)
		return
	}
	r.legacyB = r.given
	if r.legacyB == nil {
		r.legacyB = record.NewBroadcaster()
	}
	r.legacyB.StartRecordingToSink(&corev1client.EventSinkImpl{Interface: core.Events("")})
	r.legacyB.StartEventWatcher(func(e *corev1.Event) {
		r.log.V(1).Info(e.Message, "type", e.Type, "object", e.InvolvedObject, "reason", e.Reason)
	})
	r.eventsB = events.NewBroadcaster(&events.EventSinkImpl{Interface: evts})
	ctx, cancel := context.WithCancel(log.IntoContext(context.Background(), r.log))
	r.cancel = cancel
	if err := r.eventsB.StartRecordingToSinkWithContext(ctx); err != nil {
		r.err = fmt.Errorf("starting to record events.k8s.io/v1 Events: %w", err)
		return
	}
	stopLog, err := r.eventsB.StartLogging(r.log.V(1))
	if err != nil {
		r.log.Error(err, "Not logging Events")
	}
	r.stopLog = stopLog
}

// stop shuts the broadcasters down (not an application's), waiting for
// recorders in the middle of recording.
func (r *recorders) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	if !r.started {
		return
	}
	if r.eventsB != nil {
		r.eventsB.Shutdown()
	}
	if r.cancel != nil {
		r.cancel()
	}
	if r.stopLog != nil {
		r.stopLog()
	}
	if r.legacyB != nil && r.given == nil {
		r.legacyB.Shutdown()
	}
}

// legacyRecorder records core/v1 Events through the cluster's broadcaster.
type legacyRecorder struct {
	rs   *recorders
	name string
	once sync.Once
	rec  record.EventRecorder
}

var _ record.EventRecorder = &legacyRecorder{}

func (l *legacyRecorder) do(fn func(record.EventRecorder)) {
	l.rs.with(func(b record.EventBroadcaster, _ events.EventBroadcaster) {
		l.once.Do(func() { l.rec = b.NewRecorder(l.rs.scheme, corev1.EventSource{Component: l.name}) })
		fn(l.rec)
	})
}

func (l *legacyRecorder) Event(object runtime.Object, eventtype, reason, message string) {
	l.do(func(r record.EventRecorder) { r.Event(object, eventtype, reason, message) })
}

func (l *legacyRecorder) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	l.do(func(r record.EventRecorder) { r.Eventf(object, eventtype, reason, messageFmt, args...) })
}

func (l *legacyRecorder) AnnotatedEventf(object runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	l.do(func(r record.EventRecorder) {
		r.AnnotatedEventf(object, annotations, eventtype, reason, messageFmt, args...)
	})
}

// eventsRecorder records events.k8s.io/v1 Events through the cluster's
// broadcaster.
type eventsRecorder struct {
	rs   *recorders
	name string
	once sync.Once
	rec  events.EventRecorderLogger
}

var _ recorder.EventRecorder = &eventsRecorder{}

func (l *eventsRecorder) do(fn func(events.EventRecorderLogger)) {
	l.rs.with(func(_ record.EventBroadcaster, b events.EventBroadcaster) {
		l.once.Do(func() { l.rec = b.NewRecorder(l.rs.scheme, l.name) })
		fn(l.rec)
	})
}

func (l *eventsRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	l.do(func(r events.EventRecorderLogger) {
		r.Eventf(regarding, related, eventtype, reason, action, note, args...)
	})
}

func (l *eventsRecorder) AnnotatedEventf(regarding, related runtime.Object, annotations map[string]string, eventtype, reason, action, note string, args ...any) {
	l.do(func(r events.EventRecorderLogger) {
		r.(events.AnnotatedEventRecorder).AnnotatedEventf(regarding, related, annotations, eventtype, reason, action, note, args...)
	})
}
