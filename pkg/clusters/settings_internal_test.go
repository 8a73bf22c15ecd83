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

// Every Set reaches the engine, which decides: the same Hash again carries
// the new pause and source (the engine changes those only, never rebuilds),
// and Set reports it as no change.
func TestSetPublishesThePauseAndSourceUnderTheSameHash(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pub := &publications{}
	var m Members
	m.Start(ctx, pub, logr.Discard())
	cfg := &rest.Config{Host: "https://member.example:6443", BearerToken: "t"}
	m.Set("a", "h1", cfg, nil)
	source := &corev1.Secret{}
	for i, paused := range []bool{true, true, false} {
		if replaced, changed := m.Set("a", "h1", cfg, nil, SetPaused(paused), SetSource(source)); !replaced || changed {
			t.Errorf("pause %v: replaced %v, changed %v; want true, false", paused, replaced, changed)
		}
		if len(pub.set) != i+2 {
			t.Fatalf("after pause %v: %d publications, want %d", paused, len(pub.set), i+2)
		}
		last := pub.set[len(pub.set)-1]
		if last.Hash != "h1" || last.Paused != paused || last.Source != source || last.Config != cfg {
			t.Errorf("after pause %v: published Hash %q Paused %v Source %v, want h1, %v and the source", paused, last.Hash, last.Paused, last.Source, paused)
		}
	}
}
