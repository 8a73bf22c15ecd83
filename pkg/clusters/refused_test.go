package clusters_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/clusters"
	mcfleet "github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
)

// refusals records the reports of a member's Sets.
type refusals struct {
	mu      sync.Mutex
	refused []*clusters.RefusedCredentialsError
}

func (r *refusals) report(err error) {
	var refused *clusters.RefusedCredentialsError
	if errors.As(err, &refused) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.refused = append(r.refused, refused)
	}
}

func (r *refusals) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.refused)
}

// probedOptions probe every 100 ms and disconnect after 5 failures: a
// cluster whose every request fails is disconnected within a second.
var probedOptions = mcfleet.Options{
	Health:     mcfleet.HealthOptions{Interval: 100 * time.Millisecond, FailureThreshold: 5},
	MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second,
}

// readLive asks the member's API server who the cluster's requests
// authenticate as now (a SelfSubjectReview, which every identity may
// create): an error if the member rejects their credentials.
func readLive(t *testing.T, cl cluster.Cluster) error {
	return cl.GetClient().Create(t.Context(), &authenticationv1.SelfSubjectReview{})
}

// A source edited to a token the member rejects does not take the running
// cluster down: the cluster keeps its working token (reads keep working, it
// is never disconnected nor built again), the refusal is reported once, and
// a valid token given next is rotated in in place.
func TestRejectedTokenKeepsTheWorkingOne(t *testing.T) {
	rt := startRefusalTest(t)
	tk, tracker, m, r, good, cl := rt.tk, rt.tracker, &rt.m, &rt.r, rt.good, rt.cl
	count := tracker.Count("member")

	bad := rest.CopyConfig(good)
	bad.BearerToken = "not-a-token-of-this-member"
	m.Set("member", "bad", bad, r.report)
	if err := readLive(t, cl); err != nil {
		t.Fatalf("a read right after the source gave a rejected token failed: %v", err)
	}
	fleettest.Eventually(t, 30*time.Second, func() error {
		if r.count() == 0 {
			return fmt.Errorf("the refused rotation was not reported")
		}
		return nil
	})
	// The same rejected token again (a resync of the source) is not
	// reported again.
	m.Set("member", "bad", bad, r.report)
	// Ten probe intervals, twice the failures that disconnect a cluster
	// whose requests fail: the cluster keeps working all along.
	for deadline := time.Now().Add(10 * probedOptions.Health.Interval); time.Now().Before(deadline); {
		if err := readLive(t, cl); err != nil {
			t.Fatalf("a read after the refused rotation failed: %v", err)
		}
		if tracker.Engaged()["member"] != cl {
			t.Fatal("the cluster left engaged after a refused rotation")
		}
	}
	if got := cl.GetConfig().BearerToken; got != good.BearerToken {
		t.Error("the cluster's config carries another token than its working one")
	}

	next, _ := tk.config(t)
	m.Set("member", "next", next, r.report)
	if waitEngagedWith(t, tracker, next.BearerToken) != cl {
		t.Error("a valid token after a refused one built the cluster again, want it rotated in place")
	}
	if err := readLive(t, cl); err != nil {
		t.Fatalf("a read with the valid new token failed: %v", err)
	}
	if n := tracker.Count("member"); n != count {
		t.Errorf("the member was engaged %d more times, want none", n-count)
	}
	if n := r.count(); n != 1 {
		t.Errorf("the refused rotation was reported %d times, want once", n)
	}
}

// A cluster whose working token is revoked while its source holds one the
// member rejects has no credentials that work: it is disconnected, as any
// cluster whose requests all fail, after the refusal was reported once.
func TestRejectedTokenAndRevokedOneDisconnect(t *testing.T) {
	rt := startRefusalTest(t)
	tk, tracker, m, r, good, holder := rt.tk, rt.tracker, &rt.m, &rt.r, rt.good, rt.holder
	bad := rest.CopyConfig(good)
	bad.BearerToken = "not-a-token-of-this-member"
	m.Set("member", "bad", bad, r.report)
	fleettest.Eventually(t, 30*time.Second, func() error {
		if r.count() == 0 {
			return fmt.Errorf("the refused rotation was not reported")
		}
		return nil
	})
	tk.invalidate(t, holder)
	fleettest.Eventually(t, 30*time.Second, func() error {
		if _, ok := tracker.Engaged()["member"]; ok {
			return fmt.Errorf("the member is still engaged")
		}
		return nil
	})
	if n := r.count(); n != 1 {
		t.Errorf("the refused rotation was reported %d times, want once", n)
	}
}

// refusalTest is a member engaged through Members with a working token.
type refusalTest struct {
	tk      *tokens
	tracker *fleettest.Tracker
	m       clusters.Members
	r       refusals
	good    *rest.Config // the working token's config
	holder  string       // the Secret the working token is bound to
	cl      cluster.Cluster
}

func startRefusalTest(t *testing.T) *refusalTest {
	rt := &refusalTest{tk: newTokens(t, 0), tracker: fleettest.NewTracker()}
	runEngine(t, probedOptions, rt.tracker, &rt.m)
	rt.good, rt.holder = rt.tk.config(t)
	rt.m.Set("member", "good", rt.good, rt.r.report)
	rt.cl = waitEngagedWith(t, rt.tracker, rt.good.BearerToken)
	return rt
}

// waitEngagedWith waits until the member is engaged with token, and returns
// its cluster.
func waitEngagedWith(t *testing.T, tracker *fleettest.Tracker, token string) (cl cluster.Cluster) {
	t.Helper()
	fleettest.Eventually(t, 30*time.Second, func() error {
		c, ok := tracker.Engaged()["member"]
		if !ok {
			return fmt.Errorf("the member is not engaged")
		}
		if c.GetConfig().BearerToken != token {
			return fmt.Errorf("the member is engaged with another token")
		}
		cl = c
		return nil
	})
	return cl
}
