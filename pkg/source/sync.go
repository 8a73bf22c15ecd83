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
// type is listed directly (one object, metadata only) every listProbeInterval;
// listProbeFailures failures in a row fail the wait with the server's answer.
// A probe that gets no answer within listProbeTimeout, or is told to come
// back later (429, timeouts), is not a failure: a list that hangs is bounded
// by CacheSyncTimeout. Nor is a 403: the probe lists across the cluster, which
// an identity whose cache is restricted to namespaces may not do although its
// informers may; a watch that RBAC refuses fails at CacheSyncTimeout.
var (
	listProbeDelay    = time.Second
	listProbeInterval = time.Second
	listProbeTimeout  = 5 * time.Second
	listProbeFailures = 3
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

func (p listProbe) list(ctx context.Context) error {
	gvk, err := apiutil.GVKForObject(p.obj, p.scheme)
	if err != nil {
		return err
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	ctx, cancel := context.WithTimeout(ctx, listProbeTimeout)
	defer cancel()
	err = p.reader().List(ctx, list, client.Limit(1))
	switch {
	case err == nil:
		return nil
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return nil // no answer: not a failure (see listProbeTimeout)
	case apierrors.IsTooManyRequests(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err):
		return nil // a busy server is slow, not broken: the informer gets through
	case apierrors.IsForbidden(err):
		return nil // a cluster-wide list may be forbidden where the cache's namespaces are not
	}
	return err
}

// waitForSync waits until synced is closed. While it is not, the list is
// probed (see listProbeDelay): a list that keeps failing fails the wait
// within a few seconds instead of when ctx ends.
func waitForSync(ctx context.Context, name multicluster.ClusterName, typ string, synced <-chan struct{}, probe *listProbe) error {
	if probe != nil && probe.reader != nil {
		t := time.NewTimer(listProbeDelay)
		defer t.Stop()
		failures := 0
		for {
			select {
			case <-synced:
				return nil
			case <-ctx.Done():
				return &SyncError{Cluster: name, Type: typ, Err: ctx.Err()}
			case <-t.C:
			}
			err := probe.list(ctx)
			select {
			case <-synced:
				return nil
			default:
			}
			if err == nil || ctx.Err() != nil {
				failures = 0
			} else if failures++; failures >= listProbeFailures {
				return &SyncError{Cluster: name, Type: typ, Failing: true, Err: err}
			}
			t.Reset(listProbeInterval)
		}
	}
	select {
	case <-synced:
		return nil
	case <-ctx.Done():
		return &SyncError{Cluster: name, Type: typ, Err: ctx.Err()}
	}
}
