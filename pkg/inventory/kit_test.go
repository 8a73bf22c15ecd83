package inventory_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/inventory"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

func TestObjectsAreEngagedReplacedAndWithdrawn(t *testing.T) {
	e := newEnv(t)
	e.start(t)
	e.put(t, "a", map[string]string{"cluster": "one", "member": "1"})
	e.put(t, "b", map[string]string{"cluster": "two", "member": "2"})
	expect(t, e, map[multicluster.ClusterName]int{"one": 1, "two": 2})
	fleettest.Eventually(t, fleettest.DefaultTimeout, func() error {
		if e.events(t, "a", inventory.ReasonEngaged) == 0 {
			return errors.New("no ClusterEngaged Event on ConfigMap a")
		}
		return nil
	})

	e.put(t, "a", map[string]string{"cluster": "one", "member": "2"}) // new content: rebuilt
	e.put(t, "b", map[string]string{"withdraw": "test says so"})
	expect(t, e, map[multicluster.ClusterName]int{"one": 2})
	e.put(t, "a", map[string]string{"cluster": "three", "member": "2"}) // renamed: the old name goes
	expect(t, e, map[multicluster.ClusterName]int{"three": 2})
	e.remove(t, "a")
	expect(t, e, map[multicluster.ClusterName]int{})
}

func TestOneNameOneSource(t *testing.T) {
	e := newEnv(t)
	e.start(t)
	e.put(t, "first", map[string]string{"cluster": "shared", "member": "1"})
	expect(t, e, map[multicluster.ClusterName]int{"shared": 1})
	e.put(t, "second", map[string]string{"cluster": "shared", "member": "2"})
	fleettest.Eventually(t, fleettest.DefaultTimeout, func() error {
		if e.events(t, "second", inventory.ReasonDuplicateName) == 0 {
			return errors.New("no DuplicateClusterName Event on the second ConfigMap")
		}
		return nil
	})
	expect(t, e, map[multicluster.ClusterName]int{"shared": 1}) // the first keeps it
	if key, ok := e.kit.SourceOf("shared"); !ok || key.Name != "first" {
		t.Errorf("SourceOf(shared) = %v, %v; want the first ConfigMap", key, ok)
	}

	e.remove(t, "first") // lets go: the waiting one takes the name
	expect(t, e, map[multicluster.ClusterName]int{"shared": 2})
	if key, _ := e.kit.SourceOf("shared"); key.Name != "second" {
		t.Errorf("SourceOf(shared) = %v; want the second ConfigMap", key)
	}
}

// An object renamed to a name another holds lets go of its old name at
// once (a third object waiting for that name takes it), and waits for the
// new one.
func TestRenamedToATakenNameLetsGoOfTheOld(t *testing.T) {
	e := newEnv(t)
	e.start(t)
	e.put(t, "a", map[string]string{"cluster": "one", "member": "1"})
	e.put(t, "b", map[string]string{"cluster": "two", "member": "2"})
	expect(t, e, map[multicluster.ClusterName]int{"one": 1, "two": 2})
	e.put(t, "c", map[string]string{"cluster": "one", "member": "2"}) // waits for a's name

	e.put(t, "a", map[string]string{"cluster": "two", "member": "1"})
	expect(t, e, map[multicluster.ClusterName]int{"one": 2, "two": 2})
	if key, _ := e.kit.SourceOf("one"); key.Name != "c" {
		t.Errorf("SourceOf(one) = %v; want the ConfigMap c, which waited for it", key)
	}
	fleettest.Eventually(t, fleettest.DefaultTimeout, func() error {
		if e.events(t, "a", inventory.ReasonDuplicateName) == 0 {
			return errors.New("no DuplicateClusterName Event on the renamed ConfigMap")
		}
		return nil
	})
}

func TestSourceReadsTheObjectOfACluster(t *testing.T) {
	e := newEnv(t)
	e.start(t)
	e.put(t, "a", map[string]string{"cluster": "one", "member": "1", "note": "first"})
	expect(t, e, map[multicluster.ClusterName]int{"one": 1})
	e.put(t, "a", map[string]string{"cluster": "one", "member": "1", "note": "second"}) // same cluster
	fleettest.Eventually(t, fleettest.DefaultTimeout, func() error {
		if cm, ok := e.kit.Source(context.Background(), "one"); !ok || cm.Data["note"] != "second" {
			return fmt.Errorf("Source(one) = %v, %v; want ConfigMap a as it is now", cm, ok)
		}
		return nil
	})
	if _, ok := e.kit.Source(context.Background(), "none"); ok {
		t.Error("Source of a cluster nobody asks for found an object")
	}
}

func TestLogValuesAreLoggedWhenEngaging(t *testing.T) {
	e := newEnv(t)
	e.start(t)
	e.put(t, "a", map[string]string{"cluster": "one", "member": "1", "via": "door-7"})
	expect(t, e, map[multicluster.ClusterName]int{"one": 1})
	for line := range strings.Lines(e.logs.String()) {
		if strings.Contains(line, "Engaging cluster") && strings.Contains(line, `"via"="door-7"`) {
			return
		}
	}
	t.Errorf("no Engaging line carries the Desired's LogValues:\n%s", e.logs.String())
}

func TestTerminalProblemIsReportedOncePerChange(t *testing.T) {
	e := newEnv(t)
	e.start(t)
	e.put(t, "broken", map[string]string{"refuse": "no good"})
	fleettest.Eventually(t, fleettest.DefaultTimeout, func() error {
		if e.events(t, "broken", reasonRefused) == 0 {
			return errors.New("no Event for the refused ConfigMap")
		}
		return nil
	})
	// A related object's changes reconcile the unchanged ConfigMap again.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "related", Labels: map[string]string{testLabel: "true"}},
		Data: map[string][]byte{"owner": []byte("broken")}}
	if err := e.host.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	before := e.calls("broken")
	for i := range 3 {
		secret.Data["n"] = []byte(fmt.Sprint(i))
		if err := e.host.Update(context.Background(), secret); err != nil {
			t.Fatal(err)
		}
		fleettest.Eventually(t, fleettest.DefaultTimeout, func() error {
			if e.calls("broken") < before+i+1 {
				return errors.New("the related Secret's change did not reconcile its ConfigMap")
			}
			return nil
		})
	}
	if n := e.events(t, "broken", reasonRefused); n != 1 {
		t.Errorf("%d Events for one unchanged refused ConfigMap reconciled %d times; want 1", n, e.calls("broken"))
	}
	e.put(t, "broken", map[string]string{"refuse": "still no good"}) // a change: reported again
	fleettest.Eventually(t, fleettest.DefaultTimeout, func() error {
		if n := e.events(t, "broken", reasonRefused); n != 2 {
			return fmt.Errorf("%d Events after the ConfigMap changed; want 2", n)
		}
		return nil
	})
}

func TestInvalidNamesAreRefused(t *testing.T) {
	e := newEnv(t)
	e.start(t)
	e.put(t, "hostile", map[string]string{"cluster": "evil\nname", "member": "1"})
	e.put(t, "fine", map[string]string{"cluster": "fine", "member": "1"})
	expect(t, e, map[multicluster.ClusterName]int{"fine": 1})
	fleettest.Eventually(t, fleettest.DefaultTimeout, func() error {
		if e.events(t, "hostile", inventory.ReasonInvalidName) == 0 {
			return errors.New("no InvalidClusterName Event on the hostile ConfigMap")
		}
		return nil
	})
}

func TestListedWaitsForTheObjectsPresentAtStart(t *testing.T) {
	e := newEnv(t)
	names := []string{"p1", "p2", "p3", "p4"}
	for i, name := range names {
		e.put(t, name, map[string]string{"cluster": name, "member": fmt.Sprint(1 + i%2)})
	}
	e.put(t, "p5", map[string]string{"refuse": "counted too"})
	e.start(t)
	select {
	case <-e.kit.Listed():
	case <-time.After(fleettest.DefaultTimeout):
		t.Fatal("Listed not closed")
	}
	for _, name := range append(names, "p5") {
		if e.calls(name) == 0 {
			t.Errorf("Listed closed before ConfigMap %s was considered", name)
		}
	}
}

func TestListedWithAnEmptyInventory(t *testing.T) {
	e := newEnv(t)
	e.start(t)
	select {
	case <-e.kit.Listed():
	case <-time.After(fleettest.DefaultTimeout):
		t.Fatal("Listed not closed for an empty inventory")
	}
}

func TestStartRefusedTwiceOrWithoutSetup(t *testing.T) {
	e := newEnv(t)
	if err := e.kit.Start(context.Background(), fleettest.NewTracker()); err == nil {
		t.Error("Start before SetupWithManager succeeded; want an error")
	}
}

// runListing runs a kit in listing mode on ctx, engaging a tracker, until
// the test ends.
func runListing(t *testing.T, ctx context.Context, kit *inventory.Kit[client.Object]) *fleettest.Tracker {
	ctx, cancel := context.WithCancel(ctx)
	tr := fleettest.NewTracker()
	done := make(chan error, 1)
	go func() { done <- kit.Start(ctx, tr) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return tr
}

// listed is an inventory for the kit's listing mode.
type listed struct {
	desired []inventory.Desired
	err     error
}

func TestListingMode(t *testing.T) {
	inv := make(chan listed, 1)
	last := listed{}
	kit := inventory.New(inventory.Options[client.Object]{
		Name:     "inventory-test-listing",
		Interval: 20 * time.Millisecond,
		List: func(context.Context) ([]inventory.Desired, error) {
			select {
			case last = <-inv:
			default:
			}
			return last.desired, last.err
		},
	})
	tr := runListing(t, context.Background(), kit)
	want := func(w map[multicluster.ClusterName]int) { t.Helper(); fleettest.ExpectEngaged(t, tr, w) }

	inv <- listed{desired: []inventory.Desired{
		{Name: "a", Config: fleet.Config(1), Hash: "1"}, {Name: "b", Config: fleet.Config(2), Hash: "2"},
	}}
	want(map[multicluster.ClusterName]int{"a": 1, "b": 2})
	<-kit.Listed()
	inv <- listed{err: errors.New("inventory unreachable")} // a failed listing keeps everything
	fleettest.Consistently(t, 200*time.Millisecond, func() error {
		if n := len(tr.Engaged()); n != 2 {
			return fmt.Errorf("%d clusters engaged after a failed listing; want 2", n)
		}
		return nil
	})
	inv <- listed{desired: []inventory.Desired{{Name: "a"}}} // a unreadable this time: kept; b gone
	want(map[multicluster.ClusterName]int{"a": 1})
	inv <- listed{desired: []inventory.Desired{{Name: "a", Config: fleet.Config(2), Hash: "2"}}}
	want(map[multicluster.ClusterName]int{"a": 2})
}

// Two listed entries of one name: one name, one source, as in watch mode.
// The entry listed first takes the name and keeps it whatever the order of
// later listings; the other is skipped, reported once, and takes the name
// once the holder is no longer listed.
func TestListingModeOneNameOneSource(t *testing.T) {
	logs := &fleettest.LogBuffer{}
	var mu sync.Mutex
	var current []inventory.Desired
	set := func(d ...inventory.Desired) { mu.Lock(); defer mu.Unlock(); current = d }
	kit := inventory.New(inventory.Options[client.Object]{
		Name:     "inventory-test-listing-shared",
		Interval: 20 * time.Millisecond,
		List: func(context.Context) ([]inventory.Desired, error) {
			mu.Lock()
			defer mu.Unlock()
			return current, nil
		},
	})
	tr := runListing(t, logf.IntoContext(context.Background(), logs.Logger()), kit)
	one := inventory.Desired{Name: "a", Config: fleet.Config(1), Hash: "1"}
	two := inventory.Desired{Name: "a", Config: fleet.Config(2), Hash: "2"}
	reports := func() int { return strings.Count(logs.String(), "Skipping listed clusters that share a name") }
	stays := func(member int) {
		t.Helper()
		engaged := fleettest.ExpectEngaged(t, tr, map[multicluster.ClusterName]int{"a": member})
		fleettest.Consistently(t, 300*time.Millisecond, func() error { // 15 listings
			if got := tr.Engaged()["a"]; got != engaged["a"] {
				return fmt.Errorf("cluster a was re-created from another entry of the listing (%d engagements)", tr.Count("a"))
			}
			return nil
		})
	}

	set(one, two)
	stays(1)
	if n := reports(); n != 1 {
		t.Errorf("the shared name was reported %d times over many listings, want once", n)
	}
	set(two, one) // the holder keeps the name whatever the order
	stays(1)
	if n := tr.Count("a"); n != 1 {
		t.Errorf("cluster a was engaged %d times while its holder stayed listed, want once", n)
	}
	if n := reports(); n != 1 {
		t.Errorf("the shared name was reported %d times, want once: a listing in another order is no change", n)
	}
	set(two) // the holder is gone: the other entry takes the name
	stays(2)
}
