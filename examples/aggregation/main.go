// Command aggregation keeps a hub object current with a summary of the
// fleet: the ConfigMap "deployments" in namespace "fleet-summary" of the hub
// (the host cluster) lists, for every member cluster, how many Deployments
// it runs and their desired replicas. A change to a Deployment anywhere, a
// member joining and a member leaving each update the summary.
//
//	kubectl create namespace fleet-summary
//	go run ./examples/aggregation -namespace fleet-system
//
// With -sharding, run as many replicas as you like: each reads its own shard
// of the fleet and publishes that shard's lines beside the summary, and the
// replica that runs the host's work combines them into the one summary a
// single replica would write (fleetreader.Aggregate).
//
// The fleet comes from kubeconfig Secrets in the given namespace of the hub
// (kubeconfig provider; register members with cmd/kubeconfig-secret).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	"github.com/mcruntime/multicluster-runtime/pkg/fleetreader"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/manager/sharding"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcsource "github.com/mcruntime/multicluster-runtime/pkg/source"
	"github.com/mcruntime/multicluster-runtime/providers/kubeconfig"
)

// Summary is the hub object the controller keeps current.
var Summary = types.NamespacedName{Namespace: "fleet-summary", Name: "deployments"}

func main() {
	ns := flag.String("namespace", kubeconfig.DefaultNamespace, "hub namespace of the kubeconfig Secrets")
	sharded := flag.Bool("sharding", false, "share the fleet with the other replicas started with -sharding (Leases in -namespace)")
	flag.Parse()
	if err := run(*ns, *sharded); err != nil {
		fmt.Fprintln(os.Stderr, "aggregation:", err)
		os.Exit(1)
	}
}

func run(secretNamespace string, sharded bool) error {
	ctx := ctrl.SetupSignalHandler()
	provider := kubeconfig.New(kubeconfig.Options{Namespace: secretNamespace})
	var opts []mcmanager.Option
	if sharded {
		opts = append(opts, mcmanager.WithSharding(sharding.Options{Namespace: secretNamespace, Name: "aggregation"}))
	}
	mgr, err := mcmanager.New(ctrl.GetConfigOrDie(), provider, mcmanager.Options{}, opts...)
	if err != nil {
		return err
	}
	if err := provider.SetupWithManager(ctx, mgr); err != nil {
		return err
	}
	if err := Setup(ctx, mgr); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// Setup registers the summary of the fleet in the hub object Summary.
func Setup(ctx context.Context, mgr mcmanager.Manager) error {
	return SetupSummary(ctx, mgr, Summary)
}

// snippet:aggregation-setup
// SetupSummary registers the summary controller: one fleet reader for
// Deployments; an aggregate whose partial results (each replica's shard)
// are combined into the hub object by the replica that runs the host's
// work; and one source that turns every Deployment event of every member
// this replica reads, and every member's arrival and departure, into the
// publication of this replica's partial result.
func SetupSummary(ctx context.Context, mgr mcmanager.Manager, summary types.NamespacedName) error {
	reader, err := mgr.GetFleetReader()
	if err != nil {
		return err
	}
	if err := reader.Informer(ctx, &appsv1.Deployment{}); err != nil {
		return err
	}
	s := &Summarizer{Hub: mgr.GetLocalManager().GetClient(), Summary: summary}
	agg, err := fleetreader.NewAggregate(mgr, reader, fleetreader.AggregateOptions[Line]{
		Name:      summary.Name,
		Namespace: summary.Namespace,
		Partial:   s.Partial,
		Combine:   s.Combine,
	})
	if err != nil {
		return err
	}
	return mcbuilder.ControllerManagedBy(mgr).
		Named("fleet-summary-" + summary.Name).
		WatchesRawSource(mcsource.FanIn(&appsv1.Deployment{}, agg.Request())).
		Complete(agg)
}

// end-snippet

// Summarizer computes each member's line and writes the summary to the hub.
type Summarizer struct {
	Hub     client.Client
	Summary types.NamespacedName
}

// Line is one member's contribution to the summary.
type Line struct {
	Deployments int   `json:"deployments"`
	Replicas    int32 `json:"replicas"`
}

// snippet:aggregation-reconcile
// Partial reads one member's Deployments from its cache (no API call) and
// returns its line. It runs on the replica that reads the member.
func (s *Summarizer) Partial(ctx context.Context, reader *fleetreader.Reader, cluster multicluster.ClusterName) (Line, error) {
	deployments, err := fleetreader.List[*appsv1.Deployment](ctx, reader, fleetreader.InClusters(cluster))
	if err != nil {
		return Line{}, err
	}
	var line Line // members without Deployments are listed too
	for _, d := range deployments {
		line.Deployments++
		if d.Object.Spec.Replicas != nil {
			line.Replicas += *d.Object.Spec.Replicas
		}
	}
	return line, nil
}

// Combine writes one line per member to the hub object. It runs on one
// replica, with the lines of every member of the fleet.
func (s *Summarizer) Combine(ctx context.Context, lines map[multicluster.ClusterName]Line) error {
	var out []string
	for cluster, l := range lines {
		out = append(out, fmt.Sprintf("%s deployments=%d replicas=%d", cluster, l.Deployments, l.Replicas))
	}
	slices.Sort(out)

	summary := &corev1.ConfigMap{}
	summary.Namespace, summary.Name = s.Summary.Namespace, s.Summary.Name
	_, err := controllerutil.CreateOrUpdate(ctx, s.Hub, summary, func() error {
		summary.Data = map[string]string{"summary": strings.Join(out, "\n")}
		return nil
	})
	return err
}

// end-snippet
