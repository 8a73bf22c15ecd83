package source

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// failingReader answers every list with err.
type failingReader struct {
	client.Reader
	err   error
	calls int
}

func (r *failingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	r.calls++
	return r.err
}

func fastProbes(t *testing.T) {
	delay, interval := listProbeDelay, listProbeInterval
	listProbeDelay, listProbeInterval = time.Millisecond, time.Millisecond
	t.Cleanup(func() { listProbeDelay, listProbeInterval = delay, interval })
}

// A list the server keeps refusing (a type it does not serve) fails the
// wait, with the server's answer and the type, after listProbeFailures
// probes.
func TestWaitForSyncFailsOnAFailingList(t *testing.T) {
	fastProbes(t)
	boom := apierrors.NewNotFound(corev1.Resource("configmaps"), "")
	r := &failingReader{err: boom}
	err := waitForSync(context.Background(), "c", "*v1.ConfigMap", make(chan struct{}),
		&listProbe{reader: func() client.Reader { return r }, scheme: scheme.Scheme, obj: &corev1.ConfigMap{}})
	var se *SyncError
	if !errors.As(err, &se) || !se.Failing || se.Type != "*v1.ConfigMap" || !errors.Is(err, boom) {
		t.Fatalf("got %v, want a failing SyncError for *v1.ConfigMap wrapping the server's answer", err)
	}
	if r.calls != listProbeFailures {
		t.Errorf("failed after %d probes, want %d", r.calls, listProbeFailures)
	}
}

// A busy server (429, 503, lost connections) is not a broken one: the wait goes on until ctx ends,
// probing less and less often. A cluster-wide list that RBAC forbids (403)
// says nothing of a cache restricted to namespaces: probing stops there.
func TestWaitForSyncToleratesABusyServerAndForbiddenLists(t *testing.T) {
	fastProbes(t)
	for name, tc := range map[string]struct {
		answer   error
		min, max int // probes in 300 ms
	}{
		// 1, 2, 4, ... 256 ms apart: 9 probes (a probe a millisecond, 300).
		"429": {apierrors.NewTooManyRequests("busy", 1), listProbeFailures, 12},
		// An overloaded server's 503, and a connection lost on the way, are
		// not the list failing: informers get through them.
		"503":             {apierrors.NewServiceUnavailable("overloaded"), listProbeFailures, 12},
		"connection lost": {errors.New("http2: client connection lost"), listProbeFailures, 12},
		"403":             {apierrors.NewForbidden(corev1.Resource("configmaps"), "", errors.New("cluster-wide list")), 1, 1},
	} {
		t.Run(name, func(t *testing.T) {
			r := &failingReader{err: tc.answer}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			err := waitForSync(ctx, "c", "*v1.ConfigMap", make(chan struct{}),
				&listProbe{reader: func() client.Reader { return r }, scheme: scheme.Scheme, obj: &corev1.ConfigMap{}})
			var se *SyncError
			if !errors.As(err, &se) || se.Failing || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("got %v, want the wait to end with ctx", err)
			}
			if r.calls < tc.min || r.calls > tc.max {
				t.Errorf("%d probes, want %d to %d", r.calls, tc.min, tc.max)
			}
		})
	}
}

// A list that works ends the probing: the watch is slow, not broken, and
// probing on would load the server when it is slowest.
func TestWaitForSyncStopsProbingOnceTheListWorks(t *testing.T) {
	fastProbes(t)
	r := &failingReader{}
	synced := make(chan struct{})
	timer := time.AfterFunc(300*time.Millisecond, func() { close(synced) })
	defer timer.Stop()
	if err := waitForSync(context.Background(), "c", "*v1.ConfigMap", synced,
		&listProbe{reader: func() client.Reader { return r }, scheme: scheme.Scheme, obj: &corev1.ConfigMap{}}); err != nil {
		t.Fatal(err)
	}
	if r.calls != 1 {
		t.Errorf("%d probes of a list that works, want 1", r.calls)
	}
}

// A synced watch is never probed.
func TestWaitForSyncReturnsWhenSynced(t *testing.T) {
	synced := make(chan struct{})
	close(synced)
	r := &failingReader{err: errors.New("never called")}
	if err := waitForSync(context.Background(), "c", "t", synced, &listProbe{reader: func() client.Reader { return r }, scheme: scheme.Scheme, obj: &corev1.ConfigMap{}}); err != nil {
		t.Fatal(err)
	}
	if r.calls != 0 {
		t.Errorf("%d probes of a synced watch", r.calls)
	}
}

// A list the server fails (500) fails the wait too, but is probed 1, 2 and
// 4 intervals apart: one that an overloaded server failed has time to
// succeed, one that fails for good is reported within seconds.
func TestWaitForSyncFailsOnAServerFailingTheListAfterBackingOff(t *testing.T) {
	fastProbes(t)
	boom := apierrors.NewInternalError(errors.New("conversion webhook unavailable"))
	r := &failingReader{err: boom}
	start := time.Now()
	err := waitForSync(context.Background(), "c", "*v1.ConfigMap", make(chan struct{}),
		&listProbe{reader: func() client.Reader { return r }, scheme: scheme.Scheme, obj: &corev1.ConfigMap{}})
	var se *SyncError
	if !errors.As(err, &se) || !se.Failing || !errors.Is(err, boom) {
		t.Fatalf("got %v, want a failing SyncError wrapping the server's answer", err)
	}
	if r.calls != listProbeFailures {
		t.Errorf("failed after %d probes, want %d", r.calls, listProbeFailures)
	}
	// Delay, then 1 and 2 intervals of 1 ms: at least 4 ms.
	if took := time.Since(start); took < 4*time.Millisecond {
		t.Errorf("three probes within %s: not backed off", took)
	}
}
