package source

import (
	"slices"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
)

// recordingQueue records what is added to it.
type recordingQueue struct {
	workqueue.TypedRateLimitingInterface[string]
	added []string
}

func (q *recordingQueue) Add(item string)                       { q.added = append(q.added, item) }
func (q *recordingQueue) AddAfter(item string, _ time.Duration) { q.added = append(q.added, item) }
func (q *recordingQueue) AddRateLimited(item string)            { q.added = append(q.added, item) }

// The gate holds additions until release, replays them in order, then lets
// additions through at once, without allocating for each.
func TestSyncGate(t *testing.T) {
	q := &recordingQueue{added: make([]string, 0, 8)}
	g := newSyncGate[string](q)
	g.Add("a")
	g.AddAfter("b", time.Second)
	g.AddWithOpts(priorityqueue.AddOpts{}, "c")
	if len(q.added) != 0 {
		t.Fatalf("added before release: %v", q.added)
	}
	g.release()
	g.AddRateLimited("d")
	if want := []string{"a", "b", "c", "d"}; !slices.Equal(q.added, want) {
		t.Fatalf("added %v, want %v", q.added, want)
	}
	q.added = q.added[:0]
	if n := testing.AllocsPerRun(100, func() { g.Add("e"); q.added = q.added[:0] }); n != 0 {
		t.Fatalf("an addition through the open gate allocates %v times, want 0", n)
	}
}
