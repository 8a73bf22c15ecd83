package fleettest_test

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
)

// The tracker follows engagements as the manager hands them out: a cluster
// engaged twice under one name is counted twice, and the first instance is
// let go.
func TestTrackerRecordsEngagementsAndTheirEnd(t *testing.T) {
	tr := fleettest.NewTracker()
	a := testbed.NewCluster(t, shared.Config(0))
	b := testbed.NewCluster(t, shared.Config(1))
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	ctxB, cancelB := context.WithCancel(context.Background())
	defer cancelB()

	if err := tr.Engage(ctxA, "x", a); err != nil {
		t.Fatal(err)
	}
	if err := tr.Engage(ctxB, "x", b); err != nil {
		t.Fatal(err)
	}
	if got := tr.Engaged(); len(got) != 1 || got["x"] != b {
		t.Fatalf("engaged %v, want x engaged as its second instance", got)
	}
	if n := tr.Count("x"); n != 2 {
		t.Fatalf("Count(x) = %d, want 2", n)
	}
	// Ending the first instance must not disengage its replacement.
	cancelA()
	tr.WaitDisengaged(t, a)
	if got := tr.Engaged(); got["x"] != b {
		t.Fatalf("the end of the replaced instance disengaged x: %v", got)
	}
	cancelB()
	tr.WaitDisengaged(t, b)
	fleettest.Eventually(t, 0, func() error {
		if got := tr.Engaged(); len(got) != 0 {
			return fmt.Errorf("still engaged: %v", got)
		}
		return nil
	})
}

// Users added to a member reach it with credentials of their own.
func TestAddUserGivesOwnCredentials(t *testing.T) {
	admin1, err := shared.AddUser(1, envtest.User{Name: "fleettest-admin-1", Groups: []string{"system:masters"}})
	if err != nil {
		t.Fatal(err)
	}
	admin2, err := shared.AddUser(1, envtest.User{Name: "fleettest-admin-2", Groups: []string{"system:masters"}})
	if err != nil {
		t.Fatal(err)
	}
	if admin1.Host != shared.Config(1).Host || admin2.Host != admin1.Host {
		t.Fatalf("users reach %s and %s, want member 1 at %s", admin1.Host, admin2.Host, shared.Config(1).Host)
	}
	if bytes.Equal(admin1.CertData, admin2.CertData) {
		t.Fatal("two users share a client certificate")
	}
	// A kubeconfig of the user's config reaches the member as that user.
	kc, err := fleettest.KubeconfigFor(admin2, "admin-2")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := cluster.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := fleettest.MemberOf(context.Background(), cl); err != nil || n != 1 {
		t.Fatalf("the user's kubeconfig reaches member %d (%v), want 1", n, err)
	}

	// A user without groups has only what RBAC grants it: nothing.
	nobody, err := shared.AddUser(0, envtest.User{Name: "fleettest-nobody"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(nobody, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: fleettest.IdentityConfigMap}, &corev1.ConfigMap{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("a user without groups read a ConfigMap: err=%v", err)
	}
}

// recordingTB is a testing.TB whose Fatalf records the failure and ends the
// goroutine, as the real one does.
type recordingTB struct {
	testing.TB
	failure string
}

func (r *recordingTB) Helper() {}

func (r *recordingTB) Fatalf(format string, args ...any) {
	r.failure = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	calls := 0
	fleettest.Eventually(t, time.Minute, func() error {
		calls++
		if calls < 3 {
			return fmt.Errorf("call %d", calls)
		}
		return nil
	})
	if calls != 3 {
		t.Fatalf("condition called %d times, want 3", calls)
	}
}

func TestEventuallyFailsWithTheLastError(t *testing.T) {
	r := &recordingTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fleettest.Eventually(r, 200*time.Millisecond, func() error { return fmt.Errorf("member-3 not engaged") })
	}()
	<-done
	if !strings.Contains(r.failure, "member-3 not engaged") || !strings.Contains(r.failure, "200ms") {
		t.Fatalf("failure %q should name the timeout and the last error", r.failure)
	}
}

// A cluster whose engagement ended is not engaged any more as soon as its
// context is done: a check right after the manager stopped (which ends every
// engagement) sees none.
func TestTrackerForgetsAnEndedEngagementAtOnce(t *testing.T) {
	tr := fleettest.NewTracker()
	for i := range 100 {
		ctx, cancel := context.WithCancel(context.Background())
		if err := tr.Engage(ctx, "c", &stubCluster{}); err != nil {
			t.Fatal(err)
		}
		cancel()
		if got := tr.Engaged(); len(got) != 0 {
			t.Fatalf("round %d: engaged %v after the engagement ended", i, got)
		}
	}
}

// stubCluster stands for a cluster the tracker only records.
type stubCluster struct{ cluster.Cluster }
