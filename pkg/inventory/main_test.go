package inventory_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/inventory"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// fleet is shared by every test: member 0 is also the host, where each test
// keeps its inventory in a namespace of its own.
var fleet *fleettest.Fleet

func TestMain(m *testing.M) {
	fleettest.RunMainWithOptions(m, 3, fleettest.Options{}, func(f *fleettest.Fleet) error {
		fleet = f
		return f.MarkMembers()
	})
}

// The test inventory: a ConfigMap labelled "inventory-test" asks for the
// cluster named by its key "cluster", reached as fleet member "member"; a
// key "refuse" makes it a terminal problem. A Secret labelled
// "inventory-test" concerns the ConfigMap its key "owner" names.
const (
	testLabel     = "inventory-test"
	reasonRefused = "TestRefused"
)

// env is one test's namespace, kit, tracker and the inventory objects its
// Desire was called with.
type env struct {
	ns      string
	host    client.Client
	kit     *inventory.Kit[*corev1.ConfigMap]
	tracker *fleettest.Tracker
	logs    *fleettest.LogBuffer

	mu      sync.Mutex
	desired map[string]int // Desire calls by ConfigMap name
}

func newEnv(t *testing.T) *env {
	t.Helper()
	host, err := client.New(fleet.Config(0), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "inventory-"}}
	if err := host.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = host.Delete(context.Background(), ns) })
	e := &env{ns: ns.Name, host: host, tracker: fleettest.NewTracker(), logs: &fleettest.LogBuffer{}, desired: map[string]int{}}
	selector := labels.SelectorFromSet(labels.Set{testLabel: "true"})
	e.kit = inventory.New(inventory.Options[*corev1.ConfigMap]{
		Name:       "inventory-test-" + e.ns,
		Object:     &corev1.ConfigMap{},
		Namespaces: []string{e.ns},
		Selectors:  []labels.Selector{selector},
		Related: []inventory.Related{{
			Object: &corev1.Secret{}, Selector: selector,
			Owners: func(o client.Object) []client.ObjectKey {
				return []client.ObjectKey{{Namespace: o.GetNamespace(), Name: string(o.(*corev1.Secret).Data["owner"])}}
			},
		}},
		Desire: e.desire,
	})
	return e
}

func (e *env) desire(_ context.Context, _ client.Reader, cm *corev1.ConfigMap) (inventory.Desired, error) {
	e.mu.Lock()
	e.desired[cm.Name]++
	e.mu.Unlock()
	if msg, ok := cm.Data["refuse"]; ok {
		return inventory.Desired{}, inventory.Refused(reasonRefused, fmt.Errorf("ConfigMap %s: %s", cm.Name, msg))
	}
	if why, ok := cm.Data["withdraw"]; ok {
		return inventory.Desired{Withdrawn: why}, nil
	}
	i, err := strconv.Atoi(cm.Data["member"])
	if err != nil || i >= fleet.Len() {
		return inventory.Desired{}, fmt.Errorf("ConfigMap %s: bad member %q", cm.Name, cm.Data["member"])
	}
	d := inventory.Desired{Name: cm.Data["cluster"], Config: fleet.Config(i), Hash: cm.Data["member"]}
	if via, ok := cm.Data["via"]; ok {
		d.LogValues = []any{"via", via}
	}
	return d, nil
}

func (e *env) calls(name string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.desired[name]
}

// start runs a manager with the kit as its provider until the test ends.
func (e *env) start(t *testing.T) {
	t.Helper()
	mgr, err := mcmanager.New(fleet.Config(0), e.kit, mcmanager.Options{
		Logger:     e.logs.Logger(),
		Metrics:    server.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.kit.SetupWithManager(context.Background(), mgr); err != nil {
		t.Fatal(err)
	}
	if err := mgr.Add(e.tracker); err != nil {
		t.Fatal(err)
	}
	fleettest.RunManager(t, mgr)
}

// put creates or updates the inventory ConfigMap name with data.
func (e *env) put(t *testing.T, name string, data map[string]string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name, Labels: map[string]string{testLabel: "true"}}, Data: data}
	if err := e.host.Create(context.Background(), cm); err == nil {
		return
	}
	old := &corev1.ConfigMap{}
	if err := e.host.Get(context.Background(), client.ObjectKeyFromObject(cm), old); err != nil {
		t.Fatal(err)
	}
	old.Data = data
	if err := e.host.Update(context.Background(), old); err != nil {
		t.Fatal(err)
	}
}

func (e *env) remove(t *testing.T, name string) {
	t.Helper()
	if err := e.host.Delete(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}}); err != nil {
		t.Fatal(err)
	}
}

// events counts the Events of reason recorded on the ConfigMap name, with
// the repeats of each Event series.
func (e *env) events(t *testing.T, name, reason string) int {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := e.host.List(context.Background(), list, client.InNamespace(e.ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range list.Items {
		if ev.Regarding.Kind == "ConfigMap" && ev.Regarding.Name == name && ev.Reason == reason {
			n++
			if ev.Series != nil {
				n += int(ev.Series.Count) - 1
			}
		}
	}
	return n
}

func expect(t *testing.T, e *env, want map[multicluster.ClusterName]int) {
	t.Helper()
	fleettest.ExpectEngaged(t, e.tracker, want)
}
