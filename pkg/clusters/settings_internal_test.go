package clusters

import (
	"context"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// publications records what Members publishes.
type publications struct{ set []fleet.Member }

func (p *publications) Engage(context.Context, multicluster.ClusterName, cluster.Cluster) error {
	return nil
}
func (p *publications) SetMember(m fleet.Member)                                { p.set = append(p.set, m) }
func (p *publications) RemoveMember(multicluster.ClusterName)                   {}
func (p *publications) Lookup(multicluster.ClusterName) (cluster.Cluster, bool) { return nil, false }

// A pause alone publishes the member again under the same Hash with Paused
// changed (the engine changes the pause only, never rebuilds); a new source
// object alone publishes nothing.
func TestSetPausedRepublishesTheSameHash(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pub := &publications{}
	var m Members
	m.Start(ctx, pub, logr.Discard())
	cfg := &rest.Config{Host: "https://member.example:6443", BearerToken: "t"}
	m.Set("a", "h1", cfg, nil)
	m.Set("a", "h1", cfg, nil, SetSource(&corev1.Secret{}))
	if len(pub.set) != 1 {
		t.Fatalf("a new source alone published the member again (%d publications)", len(pub.set))
	}
	for i, paused := range []bool{true, true, false} {
		if replaced, changed := m.Set("a", "h1", cfg, nil, SetPaused(paused)); !replaced || changed {
			t.Errorf("pause %v: replaced %v, changed %v; want true, false", paused, replaced, changed)
		}
		want := []int{2, 2, 3}[i]
		if len(pub.set) != want {
			t.Fatalf("after pause %v: %d publications, want %d", paused, len(pub.set), want)
		}
		last := pub.set[len(pub.set)-1]
		if last.Hash != pub.set[0].Hash || last.Paused != paused {
			t.Errorf("after pause %v: published Hash %q Paused %v, want Hash %q", paused, last.Hash, last.Paused, pub.set[0].Hash)
		}
	}
}
