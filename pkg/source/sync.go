package source

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// SyncError is what a watch's WaitForSync returns when the watch did not
// deliver its initial list: the list of its type keeps failing in the
// cluster (Err is the API server's answer), or ctx ended first. Its
// message does not repeat the cluster: callers wrap it with theirs.
type SyncError struct {
	Cluster multicluster.ClusterName
	// Type is the watched Go type, as %T prints it (*v1.ConfigMap).
	Type string
	// Failing is true when the list was seen failing, false when ctx ended.
	Failing bool
	Err     error
}

func (e *SyncError) Error() string {
	if e.Failing {
		return fmt.Sprintf("listing %s keeps failing: %v", e.Type, e.Err)
	}
	return fmt.Sprintf("waiting for %s to sync: %v", e.Type, e.Err)
}

func (e *SyncError) Unwrap() error { return e.Err }

// How a watch that has not synced is checked: an informer retries a failing
// list with backoff and only logs the errors, so a list that fails would show
// only when CacheSyncTimeout runs out. After listProbeDelay without sync, the
// type is listed directly (one object, metadata only), and again every
// listProbeInterval while the server refuses it (a 4xx: the type is not
// served, the credentials are not accepted, the request is invalid), or
// after 1, 2, 4... intervals while it fails it (a 5xx other than 503);
// listProbeFailures of these in a row fail the wait with the server's answer.
//
// A list that works ends the probing: the watch is only slow (a large list,
// a busy server), and probing on would add a list per second per watch to
// the server's load at the very moment it is slowest (10,000 clusters
// starting on one server made hundreds of thousands). A 403 ends it too: the
// probe lists across the cluster, which an identity whose cache is
// restricted to namespaces may not do although its informers may, so it
// cannot tell; a watch that RBAC refuses fails at CacheSyncTimeout. A probe
// that gets no answer within listProbeTimeout, is told to come back later
// (429, 503, timeouts) or loses its connection is not a failure either: the
// next one waits twice as long, up to listProbeMaxInterval. Under load an
// API server gives such answers to many lists that succeed on the
// informer's next try, and refusing those clusters' engagements restarts
// their informers: 10,000 clusters starting on one server had about 1,000
// engagements refused a run.
var (
	listProbeDelay       = time.Second
	listProbeInterval    = time.Second
	listProbeMaxInterval = 30 * time.Second
	listProbeTimeout     = 5 * time.Second
	listProbeFailures    = 3
)

// listVerdict is what a probe of a list says.
type listVerdict int

const (
	listFails       listVerdict = iota // the server refused the list (4xx): count it
	listServerFails                    // the server failed the list (5xx): count it, probe again later
	listWorks                          // the list works, or the probe cannot tell (403): stop probing
	listBusy                           // no answer, or come back later: probe again, later
)

// listProbe lists one object of obj's type directly from the API server.
type listProbe struct {
	// reader returns the cluster's API reader: asked for when the probe
	// first lists, which few clusters ever do, since a cluster built by
	// pkg/clusters.NewCluster builds it on first use.
	reader func() client.Reader
	scheme *runtime.Scheme
	obj    client.Object
}

func (p listProbe) list(ctx context.Context) (listVerdict, error) {
	gvk, err := apiutil.GVKForObject(p.obj, p.scheme)
	if err != nil {
		return listFails, err
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	ctx, cancel := context.WithTimeout(ctx, listProbeTimeout)
	defer cancel()
	err = p.reader().List(ctx, list, client.Limit(1))
	var status apierrors.APIStatus
	switch {
	case err == nil, apierrors.IsForbidden(err):
		return listWorks, err
	case errors.Is(ctx.Err(), context.DeadlineExceeded), !errors.As(err, &status),
		apierrors.IsTooManyRequests(err), apierrors.IsTimeout(err), apierrors.IsServerTimeout(err),
		apierrors.IsServiceUnavailable(err):
		// No answer, an answer that never came whole (the connection, not
		// the list), or the server saying it is busy: informers retry
		// through these, and an overloaded server gives them by the
		// thousand.
		return listBusy, err
	case status.Status().Code >= 500:
		return listServerFails, err
	}
	return listFails, err
}

// waitForSync waits until synced is closed. While it is not, the list is
// probed (see listProbeDelay): a list that keeps failing fails the wait
// within a few seconds instead of when ctx ends.
func waitForSync(ctx context.Context, name multicluster.ClusterName, typ string, synced <-chan struct{}, probe *listProbe) error {
	if probe != nil && probe.reader != nil {
		t := time.NewTimer(listProbeDelay)
		defer t.Stop()
		failures, interval := 0, listProbeInterval
	probing:
		for {
			select {
			case <-synced:
				return nil
			case <-ctx.Done():
				return &SyncError{Cluster: name, Type: typ, Err: ctx.Err()}
			case <-t.C:
			}
			verdict, err := probe.list(ctx)
			select {
			case <-synced:
				return nil
			default:
			}
			switch {
			case ctx.Err() != nil:
				continue // reported by the select above
			case verdict == listWorks:
				break probing
			case verdict == listBusy:
				failures, interval = 0, min(2*interval, listProbeMaxInterval)
			default:
				if failures++; failures >= listProbeFailures {
					return &SyncError{Cluster: name, Type: typ, Failing: true, Err: err}
				}
				interval = listProbeInterval
				if verdict == listServerFails {
					// 1, 2, 4 s: a list that fails for good is still
					// reported within seconds, while one an overloaded
					// server failed has time to succeed.
					interval = listProbeInterval << (failures - 1)
				}
			}
			t.Reset(interval)
		}
	}
	select {
	case <-synced:
		return nil
	case <-ctx.Done():
		return &SyncError{Cluster: name, Type: typ, Err: ctx.Err()}
	}
}
