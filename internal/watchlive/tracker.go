package watchlive

import (
	"io"
	"sync/atomic"
	"time"
)

// epoch is the origin of the tracker's clock: time.Since(epoch) reads the
// monotonic clock, which no change of the wall clock moves.
var epoch = time.Now()

// Tracker records when the watches of one cluster last received data. The
// zero value is ready to use; it is safe for concurrent use and costs one
// atomic store per read of a watch's body.
type Tracker struct {
	last    atomic.Int64 // time.Since(epoch) of the last delivery, or of the last watch opened
	watches atomic.Int64 // watch responses seen so far
	open    atomic.Int64 // watch responses not yet closed
}

// Source is implemented by clusters that follow their watches.
type Source interface {
	// WatchLiveness returns the cluster's tracker.
	WatchLiveness() *Tracker
}

// Of returns the tracker of cl, or nil if cl does not follow its watches.
func Of(cl any) *Tracker {
	if s, ok := cl.(Source); ok {
		return s.WatchLiveness()
	}
	return nil
}

// Watch follows body, the body of a watch the server accepted: the answer
// itself counts as a delivery, and so does every read of the body that
// returns data (the API server writes each event and bookmark as it happens,
// so a read returns as one arrives).
func (t *Tracker) Watch(body io.ReadCloser) io.ReadCloser {
	t.touch()
	t.watches.Add(1)
	t.open.Add(1)
	return &watchBody{ReadCloser: body, t: t}
}

func (t *Tracker) touch() { t.last.Store(int64(time.Since(epoch))) }

// Silence returns how long no watch of the cluster has received anything,
// and whether it ever watched: a cluster with no watch yet is never silent.
// The time runs from the last delivery on any watch, open or since closed:
// watches that end are opened again by their informers, whose new answer is
// a delivery, so a silence that outlasts a watch's end means its successors
// are not answered either.
func (t *Tracker) Silence() (silent time.Duration, watched bool) {
	if t == nil || t.watches.Load() == 0 {
		return 0, false
	}
	return max(time.Since(epoch)-time.Duration(t.last.Load()), 0), true
}

// Open returns the watches open now, and all those seen so far.
func (t *Tracker) Open() (open, seen int64) {
	return t.open.Load(), t.watches.Load()
}

// watchBody is a watch's body, followed.
type watchBody struct {
	io.ReadCloser
	t      *Tracker
	closed atomic.Bool
}

func (b *watchBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.t.touch()
	}
	return n, err
}

func (b *watchBody) Close() error {
	if b.closed.CompareAndSwap(false, true) {
		b.t.open.Add(-1)
	}
	return b.ReadCloser.Close()
}
