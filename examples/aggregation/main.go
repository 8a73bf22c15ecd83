// Command aggregation keeps a hub object current with a summary of the
// fleet: the ConfigMap "deployments" in namespace "fleet-summary" of the hub
// (the host cluster) lists, for every member cluster, how many Deployments
// it runs and their desired replicas. A change to a Deployment anywhere, a
// member joining and a member leaving each update the summary with one
// reconcile.
//
//	kubectl create namespace fleet-summary
//	go run ./examples/aggregation -namespace fleet-system
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
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	"github.com/mcruntime/multicluster-runtime/pkg/fleetreader"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	mcsource "github.com/mcruntime/multicluster-runtime/pkg/source"
	"github.com/mcruntime/multicluster-runtime/providers/kubeconfig"
)

// Summary is the hub object the controller keeps current.
var Summary = types.NamespacedName{Namespace: "fleet-summary", Name: "deployments"}

func main() {
	ns := flag.String("namespace", kubeconfig.DefaultNamespace, "hub namespace of the kubeconfig Secrets")
	flag.Parse()
	if err := run(*ns); err != nil {
		fmt.Fprintln(os.Stderr, "aggregation:", err)
		os.Exit(1)
	}
}

func run(secretNamespace string) error {
	ctx := ctrl.SetupSignalHandler()
	provider := kubeconfig.New(kubeconfig.Options{Namespace: secretNamespace})
	mgr, err := mcmanager.New(ctrl.GetConfigOrDie(), provider, mcmanager.Options{})
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

// snippet:aggregation-setup
// Setup registers the summary controller: one fleet reader for Deployments,
// and one source that turns every Deployment event of every member, and
// every member's arrival and departure, into the one hub request.
func Setup(ctx context.Context, mgr mcmanager.Manager) error {
	reader, err := mgr.GetFleetReader()
	if err != nil {
		return err
	}
	if err := reader.Informer(ctx, &appsv1.Deployment{}); err != nil {
		return err
	}
	return mcbuilder.ControllerManagedBy(mgr).
		Named("fleet-summary").
		WatchesRawSource(mcsource.FanIn(&appsv1.Deployment{}, reconcile.Request{NamespacedName: Summary})).
		Complete(&Summarizer{Reader: reader, Hub: mgr.GetLocalManager().GetClient()})
}

// end-snippet

// Summarizer writes the summary of the fleet to the hub.
type Summarizer struct {
	Reader *fleetreader.Reader
	Hub    client.Client
}

// snippet:aggregation-reconcile
// Reconcile reads every member's Deployments from the caches (no API call
// per member) and writes one line per member to the hub object.
func (s *Summarizer) Reconcile(ctx context.Context, req mcreconcile.Request) (mcreconcile.Result, error) {
	deployments, err := fleetreader.List[*appsv1.Deployment](ctx, s.Reader)
	if err != nil {
		return mcreconcile.Result{}, err
	}
	count, replicas := map[string]int{}, map[string]int32{}
	for _, cluster := range s.Reader.Clusters() {
		count[cluster] = 0 // members without Deployments are listed too
	}
	for _, d := range deployments {
		count[d.Cluster]++
		if d.Object.Spec.Replicas != nil {
			replicas[d.Cluster] += *d.Object.Spec.Replicas
		}
	}
	var lines []string
	for cluster, n := range count {
		lines = append(lines, fmt.Sprintf("%s deployments=%d replicas=%d", cluster, n, replicas[cluster]))
	}
	slices.Sort(lines)

	summary := &corev1.ConfigMap{}
	summary.Namespace, summary.Name = req.Namespace, req.Name
	_, err = controllerutil.CreateOrUpdate(ctx, s.Hub, summary, func() error {
		summary.Data = map[string]string{"summary": strings.Join(lines, "\n")}
		return nil
	})
	return mcreconcile.Result{}, err
}

// end-snippet
