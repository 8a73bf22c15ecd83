package namespace

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
)

// seenEvents collects what a handler on a virtual informer receives.
type seenEvents struct {
	mu     sync.Mutex
	events []string
	bad    []string
}

func (s *seenEvents) record(kind string, obj any, wantNS string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	cm, ok := obj.(*corev1.ConfigMap)
	switch {
	case !ok:
		s.bad = append(s.bad, fmt.Sprintf("%s: %T", kind, obj))
	case cm.Namespace != VirtualNamespace:
		s.bad = append(s.bad, fmt.Sprintf("%s %s: namespace %q", kind, cm.Name, cm.Namespace))
	case cm.Data["ns"] != wantNS:
		s.bad = append(s.bad, fmt.Sprintf("%s %s: object of namespace %q", kind, cm.Name, cm.Data["ns"]))
	default:
		s.events = append(s.events, kind+" "+cm.Name)
	}
}

func (s *seenEvents) has(e string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, got := range s.events {
		if got == e {
			return nil
		}
	}
	return fmt.Errorf("no %q in %v", e, s.events)
}

func TestInformerViewDeliversOnlyItsNamespace(t *testing.T) {
	c := directClient(t)
	ctx := context.Background()
	nss := []string{"view-a", "view-b"}
	createNamespaces(t, c, nss, "initial")
	env := startManager(t, nil, nil)

	seen := map[string]*seenEvents{}
	regs := map[string]toolscache.ResourceEventHandlerRegistration{}
	infs := map[string]cache.Informer{}
	for _, ns := range nss {
		var vc cluster.Cluster
		fleettest.Eventually(t, 30*time.Second, func() (err error) { vc, err = env.p.Get(ctx, ns); return err })
		inf, err := vc.GetCache().GetInformer(ctx, &corev1.ConfigMap{}, cache.BlockUntilSynced(false))
		if err != nil {
			t.Fatal(err)
		}
		s := &seenEvents{}
		reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { s.record("add", obj, ns) },
			UpdateFunc: func(_, obj any) { s.record("update", obj, ns) },
			DeleteFunc: func(obj any) { s.record("delete", obj, ns) },
		})
		if err != nil {
			t.Fatal(err)
		}
		seen[ns], regs[ns], infs[ns] = s, reg, inf
		fleettest.Eventually(t, 10*time.Second, func() error {
			if !reg.HasSynced() {
				return fmt.Errorf("registration in %s not synced", ns)
			}
			return nil
		})
		if err := s.has("add initial"); err != nil {
			t.Fatalf("cluster %q: initial list: %v", ns, err)
		}
	}

	// Live events reach only their namespace's handler.
	for _, ns := range nss {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "live-" + ns}, Data: map[string]string{"ns": ns}}
		if err := c.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		cm.Data["more"] = "1"
		if err := c.Update(ctx, cm); err != nil {
			t.Fatal(err)
		}
		if err := c.Delete(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range nss {
		for _, e := range []string{"add live-" + ns, "update live-" + ns, "delete live-" + ns} {
			fleettest.Eventually(t, 10*time.Second, func() error { return seen[ns].has(e) })
		}
	}

	// After RemoveEventHandler, nothing more arrives.
	if err := infs["view-a"].RemoveEventHandler(regs["view-a"]); err != nil {
		t.Fatal(err)
	}
	before := len(seen["view-a"].events)
	for _, ns := range nss {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "after-" + ns}, Data: map[string]string{"ns": ns}}
		if err := c.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	// view-b's event is the barrier: the dispatcher handles events in order.
	fleettest.Eventually(t, 10*time.Second, func() error { return seen["view-b"].has("add after-view-b") })
	seen["view-a"].mu.Lock()
	if after := len(seen["view-a"].events); after != before {
		t.Errorf("removed handler got %d more events: %v", after-before, seen["view-a"].events[before:])
	}
	seen["view-a"].mu.Unlock()

	// A handler may remove itself from within a callback.
	var selfCalls atomic.Int32
	var selfReg toolscache.ResourceEventHandlerRegistration
	var regMu sync.Mutex
	regMu.Lock() // held until selfReg is set; initial-list calls do not take it
	selfReg, err := infs["view-b"].AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if obj.(*corev1.ConfigMap).Name == "initial" || obj.(*corev1.ConfigMap).Name == "after-view-b" {
				return // the initial list
			}
			selfCalls.Add(1)
			regMu.Lock()
			defer regMu.Unlock()
			if err := infs["view-b"].RemoveEventHandler(selfReg); err != nil {
				t.Error(err)
			}
		},
	})
	regMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"self-1", "self-2"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "view-b", Name: name}, Data: map[string]string{"ns": "view-b"}}
		if err := c.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	fleettest.Eventually(t, 10*time.Second, func() error { return seen["view-b"].has("add self-2") })
	if n := selfCalls.Load(); n != 1 {
		t.Errorf("self-removing handler called %d times, want 1", n)
	}

	for ns, s := range seen {
		if len(s.bad) > 0 {
			t.Errorf("cluster %q received foreign or unrewritten objects: %v", ns, s.bad)
		}
	}
}
