package capi_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	//lint:ignore SA1019 v1beta1 is deprecated upstream, and supported here for installations that serve nothing newer.
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	capi "github.com/mcruntime/multicluster-runtime/providers/cluster-api"
)

// env is one test's namespace on a host, and a manager running the provider.
type env struct {
	ns      string
	host    client.Client
	tracker *fleettest.Tracker
	logs    *fleettest.LogBuffer
	mgr     mcmanager.Manager
	// setup, if set, adds controllers to the manager before it runs.
	setup func(mcmanager.Manager)
}

// start creates a namespace on control plane h and runs a manager with a
// provider built from opts until the test ends.
func start(t *testing.T, h int, opts capi.Options) *env {
	t.Helper()
	return startAs(t, h, opts, nil)
}

// startAs is start with the manager running as the identity that identity
// returns for the test's namespace (nil: the admin).
func startAs(t *testing.T, h int, opts capi.Options, identity func(ns string) *rest.Config) *env {
	t.Helper()
	e := newEnv(t, h)
	e.run(t, h, opts, identity)
	return e
}

// newEnv creates a namespace on control plane h, deleted when the test ends.
func newEnv(t *testing.T, h int) *env {
	t.Helper()
	ctx := context.Background()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clusterv1.AddToScheme, clusterv1beta1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	host, err := client.New(fleet.Config(h), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "capi-"}}
	if err := host.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = host.Delete(context.Background(), ns) })
	return &env{ns: ns.Name, host: host, tracker: fleettest.NewTracker(), logs: &fleettest.LogBuffer{}}
}

// run runs, until the test ends, a manager on control plane h (as identity,
// or the admin if nil) with a provider built from opts, limited to the
// namespace.
func (e *env) run(t *testing.T, h int, opts capi.Options, identity func(ns string) *rest.Config) {
	t.Helper()
	ctx := context.Background()
	opts.Namespaces = []string{e.ns}
	cfg := fleet.Config(h)
	if identity != nil {
		cfg = identity(e.ns)
	}
	p := capi.New(opts)
	mgr, err := mcmanager.New(cfg, p, mcmanager.Options{
		Logger:     e.logs.Logger(),
		Metrics:    server.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.SetupWithManagerContext(ctx, mgr); err != nil {
		t.Fatal(err)
	}
	if err := mgr.Add(e.tracker); err != nil {
		t.Fatal(err)
	}
	if e.setup != nil {
		e.setup(mgr)
	}
	t.Cleanup(func() { // after the manager stopped
		if got := e.tracker.Engaged(); len(got) > 0 {
			t.Errorf("clusters still engaged after the manager stopped: %v", got)
		}
	})
	e.mgr = mgr
	fleettest.RunManager(t, mgr)
}

func (e *env) name(cluster string) string { return e.ns + "/" + cluster }

// secret returns the kubeconfig Secret of cluster, as Cluster API writes it.
func (e *env) secret(cluster, kubeconfig string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: e.ns, Name: cluster + capi.KubeconfigSecretSuffix,
			Labels: map[string]string{capi.ClusterNameLabel: cluster},
		},
		Type: "cluster.x-k8s.io/secret",
		Data: map[string][]byte{capi.KubeconfigSecretKey: []byte(kubeconfig)},
	}
}

// cluster creates a v1beta2 Cluster, with an initialised control plane if
// ready, and returns it.
func (e *env) cluster(t *testing.T, name string, ready bool, labels map[string]string) *clusterv1.Cluster {
	t.Helper()
	c := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name, Labels: labels},
		Spec:       clusterv1.ClusterSpec{Paused: ptr.To(false)}, // the API requires a non-empty spec
	}
	if err := e.host.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if ready {
		e.setReady(t, c, true)
	}
	return c
}

func (e *env) setReady(t *testing.T, c *clusterv1.Cluster, ready bool) {
	t.Helper()
	c.Status.Initialization.ControlPlaneInitialized = ptr.To(ready)
	if err := e.host.Status().Update(context.Background(), c); err != nil {
		t.Fatal(err)
	}
}

func (e *env) create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := e.host.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}

func TestEngageOnReadinessRotateSecretAndDisengage(t *testing.T) {
	e := start(t, 0, capi.Options{})
	ctx := context.Background()
	kcA, kcB := kubeconfig(t, 1, "capi-a"), kubeconfig(t, 2, "capi-b")

	// a is provisioning: its Secret exists, its control plane is not initialised yet.
	a := e.cluster(t, "a", false, nil)
	e.create(t, e.secret("a", kcA), e.secret("b", kcB))
	e.cluster(t, "b", true, nil)
	expectEngaged(t, e.tracker, map[string]identity{e.name("b"): {Member: 2, Kubeconfig: kcB}})

	e.setReady(t, a, true)
	first := expectEngaged(t, e.tracker, map[string]identity{e.name("a"): {Member: 1, Kubeconfig: kcA}, e.name("b"): {Member: 2, Kubeconfig: kcB}})

	// Secret-only rotation, a new client certificate for the same server
	// and CA: the Cluster object is unchanged; a's running cluster takes the
	// new credentials in place (not engaged again), b is left alone.
	rotated := kubeconfig(t, 1, "capi-a-rotated")
	if err := e.host.Update(ctx, e.secret("a", rotated)); err != nil {
		t.Fatal(err)
	}
	second := expectEngaged(t, e.tracker, map[string]identity{e.name("a"): {Member: 1, Kubeconfig: rotated}, e.name("b"): {Member: 2, Kubeconfig: kcB}})
	if second[e.name("a")] != first[e.name("a")] {
		t.Error("the rotated cluster was replaced, want its certificate rotated in place")
	}
	if n := e.tracker.Count(e.name("a")); n != 1 {
		t.Errorf("a was engaged %d times, want once", n)
	}
	if second[e.name("b")] != first[e.name("b")] {
		t.Error("rotating a's Secret replaced b")
	}

	// A Cluster losing readiness is disengaged.
	b := &clusterv1.Cluster{}
	if err := e.host.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "b"}, b); err != nil {
		t.Fatal(err)
	}
	e.setReady(t, b, false)
	expectEngaged(t, e.tracker, map[string]identity{e.name("a"): {Member: 1, Kubeconfig: rotated}})

	// A Cluster being deleted (held by a finalizer, as Cluster API does while
	// it tears the machines down) is disengaged at once.
	if err := e.host.Get(ctx, client.ObjectKeyFromObject(a), a); err != nil {
		t.Fatal(err)
	}
	a.Finalizers = []string{"example.com/hold"}
	if err := e.host.Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := e.host.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	expectEngaged(t, e.tracker, map[string]identity{})
	if err := e.host.Get(ctx, client.ObjectKeyFromObject(a), a); err != nil {
		t.Fatal(err)
	}
	a.Finalizers = nil
	if err := e.host.Update(ctx, a); err != nil {
		t.Fatal(err)
	}
}

func TestBadSecretsAreReportedAndDoNotAffectOthers(t *testing.T) {
	e := start(t, 0, capi.Options{})
	ctx := context.Background()
	const token = "tok3n-that-must-never-be-printed"
	kcGood := kubeconfig(t, 1, "capi-good")

	malformed := e.secret("malformed", "apiVersion: v1\nkind: Config\nusers: [{name: u, user: {token: ["+token+"]}}]\n")
	exec := e.secret("exec", `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: `+token+`, exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: ["-c", "touch /tmp/pwned"]}}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`)
	emptyKey := e.secret("empty", "")
	e.create(t, e.secret("good", kcGood), malformed, exec, emptyKey)
	for _, name := range []string{"good", "missing", "malformed", "exec", "empty"} {
		e.cluster(t, name, true, nil)
	}
	expectEngaged(t, e.tracker, map[string]identity{e.name("good"): {Member: 1, Kubeconfig: kcGood}})

	want := map[string]string{
		"missing":   capi.ReasonKubeconfigMissing,
		"malformed": capi.ReasonInvalidKubeconfig,
		"exec":      capi.ReasonInvalidKubeconfig,
		"empty":     capi.ReasonInvalidKubeconfig,
	}
	var events eventsv1.EventList
	fleettest.Eventually(t, time.Minute, func() error {
		if err := e.host.List(ctx, &events, client.InNamespace(e.ns)); err != nil {
			return err
		}
		for name, reason := range want {
			if !hasEvent(events.Items, name, reason) {
				return fmt.Errorf("no Warning %s Event on Cluster %s", reason, name)
			}
		}
		return nil
	})

	// Others still come while the bad ones are retried.
	kcLate := kubeconfig(t, 2, "capi-late")
	e.create(t, e.secret("late", kcLate))
	e.cluster(t, "late", true, nil)
	expectEngaged(t, e.tracker, map[string]identity{e.name("good"): {Member: 1, Kubeconfig: kcGood}, e.name("late"): {Member: 2, Kubeconfig: kcLate}})

	// The missing Secret appears: the retry engages it.
	kcMissing := kubeconfig(t, 2, "capi-missing")
	e.create(t, e.secret("missing", kcMissing))
	expectEngaged(t, e.tracker, map[string]identity{
		e.name("good"): {Member: 1, Kubeconfig: kcGood}, e.name("late"): {Member: 2, Kubeconfig: kcLate}, e.name("missing"): {Member: 2, Kubeconfig: kcMissing},
	})

	if err := e.host.List(ctx, &events, client.InNamespace(e.ns)); err != nil {
		t.Fatal(err)
	}
	for _, ev := range events.Items {
		if strings.Contains(ev.Note, token) {
			t.Errorf("Event on %s carries the token: %s", ev.Regarding.Name, ev.Note)
		}
	}
	logs := e.logs.String()
	if !strings.Contains(logs, e.name("malformed")) || !strings.Contains(logs, e.name("exec")) {
		t.Errorf("the bad Clusters are not named in the logs:\n%s", logs)
	}
	if strings.Contains(logs, token) {
		t.Errorf("the token leaked into the logs:\n%s", logs)
	}
}

func hasEvent(events []eventsv1.Event, cluster, reason string) bool {
	for _, ev := range events {
		if ev.Regarding.Kind == "Cluster" && ev.Regarding.Name == cluster && ev.Reason == reason && ev.Type == corev1.EventTypeWarning {
			return true
		}
	}
	return false
}

func TestPredicatesSelectClusters(t *testing.T) {
	e := start(t, 0, capi.Options{
		Predicates: []predicate.Predicate{predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetLabels()["fleet"] == "yes"
		})},
	})
	ctx := context.Background()
	kc1, kc2 := kubeconfig(t, 1, "capi-in"), kubeconfig(t, 2, "capi-out")
	e.create(t, e.secret("in", kc1), e.secret("out", kc2))
	e.cluster(t, "out", true, nil)
	in := e.cluster(t, "in", true, map[string]string{"fleet": "yes"})
	expectEngaged(t, e.tracker, map[string]identity{e.name("in"): {Member: 1, Kubeconfig: kc1}})

	// A Cluster the predicates stop selecting is disengaged.
	if err := e.host.Get(ctx, client.ObjectKeyFromObject(in), in); err != nil {
		t.Fatal(err)
	}
	in.Labels = nil
	if err := e.host.Update(ctx, in); err != nil {
		t.Fatal(err)
	}
	expectEngaged(t, e.tracker, map[string]identity{})
}

func TestV1Beta1Clusters(t *testing.T) {
	// Control plane 2 serves only v1beta1, like a Cluster API before v1.11.
	e := start(t, 2, capi.Options{ObjectToWatch: &clusterv1beta1.Cluster{}})
	ctx := context.Background()
	kc0, kc1 := kubeconfig(t, 0, "capi-old-a"), kubeconfig(t, 1, "capi-old-b")
	e.create(t, e.secret("a", kc0), e.secret("b", kc1))

	// a reports the v1beta1 ControlPlaneInitialized condition, b the
	// controlPlaneReady flag; c neither.
	for name, status := range map[string]clusterv1beta1.ClusterStatus{
		"a": {Conditions: clusterv1beta1.Conditions{{
			Type: clusterv1beta1.ControlPlaneInitializedCondition, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now(),
		}}},
		"b": {ControlPlaneReady: true},
		"c": {},
	} {
		c := &clusterv1beta1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}}
		if err := e.host.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		c.Status = status
		if err := e.host.Status().Update(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	e.create(t, e.secret("c", kc0))
	expectEngaged(t, e.tracker, map[string]identity{e.name("a"): {Member: 0, Kubeconfig: kc0}, e.name("b"): {Member: 1, Kubeconfig: kc1}})

	// Deleted: disengaged.
	if err := e.host.Delete(ctx, &clusterv1beta1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "a"}}); err != nil {
		t.Fatal(err)
	}
	expectEngaged(t, e.tracker, map[string]identity{e.name("b"): {Member: 1, Kubeconfig: kc1}})
}

func TestUnsupportedObjectToWatch(t *testing.T) {
	p := capi.New(capi.Options{ObjectToWatch: &corev1.ConfigMap{}})
	mgr, err := mcmanager.New(fleet.Config(0), p, mcmanager.Options{Metrics: server.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.SetupWithManager(mgr); err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Fatalf("SetupWithManager with a ConfigMap to watch: %v, want an error saying it is not supported", err)
	}
}

func TestGetUnknownClusterIsNotFound(t *testing.T) {
	p := capi.New(capi.Options{})
	if _, err := p.Get(context.Background(), "ns/nope"); !errors.Is(err, multicluster.ErrClusterNotFound) {
		t.Fatalf("Get of an unknown cluster: %v, want ErrClusterNotFound", err)
	}
}

func TestCustomIsReady(t *testing.T) {
	// Engage as soon as the Cluster is provisioned, before its control plane
	// reports initialised, for example.
	e := start(t, 0, capi.Options{IsReady: func(_ context.Context, o client.Object) bool {
		return o.(*clusterv1.Cluster).Status.Phase == string(clusterv1.ClusterPhaseProvisioned)
	}})
	ctx := context.Background()
	kc := kubeconfig(t, 2, "capi-custom")
	e.create(t, e.secret("a", kc), e.secret("b", kc))
	e.cluster(t, "b", true, nil) // initialised, but not provisioned: not ready for this IsReady
	a := e.cluster(t, "a", false, nil)
	a.Status.Phase = string(clusterv1.ClusterPhaseProvisioned)
	if err := e.host.Status().Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	expectEngaged(t, e.tracker, map[string]identity{e.name("a"): {Member: 2, Kubeconfig: kc}})
}

func TestDeletedSecretDisengages(t *testing.T) {
	e := start(t, 0, capi.Options{})
	ctx := context.Background()
	kc := kubeconfig(t, 1, "capi-withdrawn")
	s := e.secret("a", kc)
	e.create(t, s)
	e.cluster(t, "a", true, nil)
	expectEngaged(t, e.tracker, map[string]identity{e.name("a"): {Member: 1, Kubeconfig: kc}})

	// Withdrawn credentials are not used any longer, and the Cluster says why.
	if err := e.host.Delete(ctx, s); err != nil {
		t.Fatal(err)
	}
	expectEngaged(t, e.tracker, map[string]identity{})
	fleettest.Eventually(t, time.Minute, func() error {
		var events eventsv1.EventList
		if err := e.host.List(ctx, &events, client.InNamespace(e.ns)); err != nil {
			return err
		}
		if !hasEvent(events.Items, "a", capi.ReasonKubeconfigMissing) {
			return errors.New("no KubeconfigMissing Event on Cluster a")
		}
		return nil
	})
}

// Clusters present at start-up hold the manager's readiness until they are
// considered: the one that can be engaged is engaged by the time the
// manager reports ready, and those that cannot (not ready, no Secret) do not
// hold readiness back.
func TestReadinessWaitsForTheClustersPresentAtStartup(t *testing.T) {
	e := newEnv(t, 0)
	kc := kubeconfig(t, 1, "capi-startup")
	e.create(t, e.secret("a", kc), e.secret("b", kc))
	e.cluster(t, "a", true, nil)
	e.cluster(t, "b", false, nil)
	e.cluster(t, "c", true, nil) // no Secret
	e.run(t, 0, capi.Options{}, nil)

	fleettest.Eventually(t, time.Minute, func() error {
		return e.mgr.(mcmanager.FleetOwner).Fleet().Ready(nil)
	})
	got := e.tracker.Engaged()
	if _, ok := got[e.name("a")]; !ok || len(got) != 1 {
		t.Fatalf("engaged when the manager turned ready: %v, want only %s", slices.Sorted(maps.Keys(got)), e.name("a"))
	}
}
