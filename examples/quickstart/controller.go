package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// snippet:quickstart-controller
// setupController registers the quickstart controller: it reconciles every
// ConfigMap of every cluster of the fleet. The reconciler is written as for
// one cluster; the only multi-cluster parts are req.ClusterName and
// mgr.GetCluster.
func setupController(mgr mcmanager.Manager, rep *reporter) error {
	if err := mgr.Add(rep); err != nil { // reports clusters as they engage and disengage
		return err
	}
	return mcbuilder.ControllerManagedBy(mgr).
		Named("quickstart-configmaps").
		For(&corev1.ConfigMap{}).
		Complete(mcreconcile.Func(func(ctx context.Context, req mcreconcile.Request) (mcreconcile.Result, error) {
			cl, err := mgr.GetCluster(ctx, req.ClusterName)
			if err != nil {
				return mcreconcile.Result{}, err // the cluster left the fleet: dropped, not retried
			}
			cm := &corev1.ConfigMap{}
			if err := cl.GetClient().Get(ctx, req.NamespacedName, cm); err != nil {
				if apierrors.IsNotFound(err) {
					rep.reconciled(req.ClusterName, req.Namespace+"/"+req.Name, "deleted")
					return mcreconcile.Result{}, nil
				}
				return mcreconcile.Result{}, err
			}
			rep.reconciled(req.ClusterName, req.Namespace+"/"+req.Name, describe(cm))
			return mcreconcile.Result{}, nil
		}))
}

// end-snippet

func describe(cm *corev1.ConfigMap) string {
	keys := make([]string, 0, len(cm.Data))
	for k := range cm.Data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return "keys: " + strings.Join(keys, ", ")
}

// clusterName names the cluster of a context of a kubeconfig file: the file
// name without extension, plus the context when it differs. Names stay short
// and stable ("cluster-1" for context cluster-1 of cluster-1.kubeconfig).
func clusterName(path, context string) multicluster.ClusterName {
	stem := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	if context == stem {
		return stem
	}
	return stem + "+" + context
}

// reporter prints one line per engagement, disengagement and reconcile, and
// keeps the figures of the summary. It is a multicluster.Aware runnable: the
// manager engages it with every cluster.
type reporter struct {
	out   io.Writer
	start time.Time

	mu         sync.Mutex
	quiet      bool // shutting down: the final disengagements are not news
	engaged    map[multicluster.ClusterName]bool
	everSeen   []multicluster.ClusterName
	disengaged []multicluster.ClusterName
	reconciles map[multicluster.ClusterName]int
	seen       map[string]int // reconciles by "<cluster> <namespace>/<name>"
}

var _ multicluster.Aware = &reporter{}

func newReporter(out io.Writer) *reporter {
	return &reporter{out: out, start: time.Now(), engaged: map[string]bool{}, reconciles: map[string]int{}, seen: map[string]int{}}
}

// Start blocks: the reporter only reacts to engagements.
func (r *reporter) Start(ctx context.Context) error { <-ctx.Done(); return nil }

// Engage reports the cluster, and its disengagement when ctx ends.
func (r *reporter) Engage(ctx context.Context, name multicluster.ClusterName, _ cluster.Cluster) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.engaged[name] = true
	if !slices.Contains(r.everSeen, name) {
		r.everSeen = append(r.everSeen, name)
	}
	r.printf("engage", "%s", name)
	context.AfterFunc(ctx, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.engaged, name)
		if r.quiet {
			return
		}
		r.disengaged = append(r.disengaged, name)
		r.printf("disengage", "%s", name)
	})
	return nil
}

func (r *reporter) reconciled(cluster multicluster.ClusterName, key, what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reconciles[cluster]++
	r.seen[cluster+" "+key]++
	r.printf("reconcile", "%-10s %s  (%s)", cluster, key, what)
}

// check evaluates cond on the reporter's state.
func (r *reporter) check(cond func(r *reporter) bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return cond(r)
}

// say prints a line of the demo's narration.
func (r *reporter) say(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.printf("fleet", format, args...)
}

// printf writes one line; r.mu is held.
func (r *reporter) printf(kind, format string, args ...any) {
	fmt.Fprintf(r.out, "%5.1fs  %-10s %s\n", time.Since(r.start).Seconds(), kind, fmt.Sprintf(format, args...))
}

// summary is what a run saw.
type summary struct {
	Engaged    []multicluster.ClusterName // every cluster engaged at some point
	Disengaged []multicluster.ClusterName // clusters that left while running
	Reconciles map[multicluster.ClusterName]int
	Fleet      []multicluster.ClusterName // engaged at the end
}

// finish stops reporting disengagements and returns the summary.
func (r *reporter) finish() summary {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.quiet = true
	s := summary{
		Engaged:    slices.Sorted(slices.Values(r.everSeen)),
		Disengaged: slices.Clone(r.disengaged),
		Reconciles: map[multicluster.ClusterName]int{},
	}
	for name := range r.engaged {
		s.Fleet = append(s.Fleet, name)
	}
	slices.Sort(s.Fleet)
	for k, v := range r.reconciles {
		s.Reconciles[k] = v
	}
	return s
}

func (s summary) String() string {
	total := 0
	per := make([]string, 0, len(s.Reconciles))
	for _, name := range slices.Sorted(maps.Keys(s.Reconciles)) {
		total += s.Reconciles[name]
		per = append(per, fmt.Sprintf("%s: %d", name, s.Reconciles[name]))
	}
	return fmt.Sprintf("summary: %d clusters engaged, %d disengaged, %d reconciles (%s); fleet now: %s",
		len(s.Engaged), len(s.Disengaged), total, orNone(per), orNone(s.Fleet))
}

func orNone(items []string) string {
	if len(items) == 0 {
		return "none"
	}
	return strings.Join(items, ", ")
}
