package fleet

import (
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcruntime/multicluster-runtime/internal/redact"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// Status is one cluster's state, for listings (Clusters).
type Status struct {
	Name  multicluster.ClusterName
	State State
}

// ClusterStatus is one cluster as this replica sees it, for listings that
// show more than its state (List, and the manager's status endpoint).
// Everything in it is read without the engine's lock: from the record's
// view and the notes the probes and the attempts leave (statusNote), each
// read atomically, so that a listing of 10,000 clusters never waits for,
// nor holds up, the engine.
type ClusterStatus struct {
	Status
	// Since is when the cluster entered State on this replica.
	Since time.Time
	// Paused: its requests are held (Engine.SetPaused, Member.Paused).
	Paused bool
	// Owned: this replica runs the cluster, or may run it: there is no
	// sharding, or the sharding admission assigns it here.
	Owned bool
	// Owner names the replica the sharding admission assigns the cluster
	// to, if the admission can tell (it implements OwnerReporter); "" else.
	Owner string
	// LastProbe is the last health probe's answer; its At is zero before
	// the first.
	LastProbe ProbeStatus
	// LastError is the text of the last failed probe or failed attempt to
	// start the cluster, redacted (URLs lose their user info and query,
	// Authorization values are replaced, and so is every current or recent
	// token and password of the cluster's credentials, by value, wherever
	// the member's text quotes it); LastErrorAt is when. Kept after the
	// cluster recovered: compare with Since.
	LastError   string
	LastErrorAt time.Time
}

// ProbeStatus is a health probe's answer.
type ProbeStatus struct {
	At      time.Time
	Latency time.Duration
	// Result is "ok", "failed" or "unauthorized" (see
	// multicluster_cluster_probes_total); "" before the first probe.
	Result string
}

// OwnerReporter is implemented by an Admission that can name the replica a
// cluster is assigned to (the sharding coordinator does): List reports it.
type OwnerReporter interface {
	Owner(name string) string
}

// ListOptions select the page of clusters List returns.
type ListOptions struct {
	// After: only names that sort after it (byte order); "" from the first.
	// A walk hands the last name of a page to the next: each cluster known
	// throughout the walk is listed exactly once.
	After multicluster.ClusterName
	// Limit: at most this many; 0 or less, every one.
	Limit int
	// States: only clusters in one of them; empty, in any.
	States []State
}

// List returns a page of the clusters this replica knows, sorted by name;
// total counts every cluster that States selects (on every page), and more
// tells whether names after the page's last are selected too. It takes no
// lock of the engine's: it reads every record's view, so a page costs a
// pass over the records and a sort of the names selected after After.
func (e *Engine) List(opts ListOptions) (page []ClusterStatus, total int, more bool) {
	cands := listScratch.Get().(*[]listed)
	defer func() {
		clear(*cands) // no record outlives the listing here
		*cands = (*cands)[:0]
		listScratch.Put(cands)
	}()
	for rec := range e.records.all() {
		v := rec.view.Load()
		if v.state == StateGone || v.state == "" || (len(opts.States) > 0 && !slices.Contains(opts.States, v.state)) {
			continue
		}
		total++
		if rec.name > opts.After {
			*cands = append(*cands, listed{rec, v})
		}
	}
	sel := *cands
	if opts.Limit > 0 && len(sel) > opts.Limit {
		// The first Limit names, sorted: a partial selection costs less than
		// sorting every name after After on each page of a walk.
		sel = firstByName(sel, opts.Limit)
		more = true
	} else {
		slices.SortFunc(sel, byName)
	}
	page = make([]ClusterStatus, len(sel))
	adm := e.opts.Admission
	owner, _ := adm.(OwnerReporter)
	for i, c := range sel {
		page[i] = statusOf(c.rec, c.v, adm, owner)
	}
	return page, total, more
}

// listed is a record and the view a listing read of it.
type listed struct {
	rec *record
	v   *view
}

func byName(a, b listed) int { return strings.Compare(a.rec.name, b.rec.name) }

// listScratch keeps the candidates' slice between listings: a walk of a
// large fleet lists it page after page.
var listScratch = sync.Pool{New: func() any { return new([]listed) }}

// firstByName reorders c so that its first k entries are its k smallest by
// name, sorted, and returns them: quickselect, then a sort of k.
func firstByName(c []listed, k int) []listed {
	lo, hi := 0, len(c)-1
	for lo < hi {
		p := partition(c, lo, hi)
		switch {
		case p == k-1:
			lo = hi
		case p < k-1:
			lo = p + 1
		default:
			hi = p - 1
		}
	}
	sel := c[:k]
	slices.SortFunc(sel, byName)
	return sel
}

// partition is Lomuto's around the middle element of c[lo..hi]; it returns
// the pivot's place.
func partition(c []listed, lo, hi int) int {
	mid := lo + (hi-lo)/2
	c[mid], c[hi] = c[hi], c[mid]
	pivot := c[hi].rec.name
	i := lo
	for j := lo; j < hi; j++ {
		if c[j].rec.name < pivot {
			c[i], c[j] = c[j], c[i]
			i++
		}
	}
	c[i], c[hi] = c[hi], c[i]
	return i
}

// statusOf reads rec's status from v and its notes; adm and owner may be nil.
func statusOf(rec *record, v *view, adm Admission, owner OwnerReporter) ClusterStatus {
	s := ClusterStatus{Status: Status{Name: rec.name, State: v.state}, Since: v.since, Paused: v.paused, Owned: true}
	if adm != nil {
		s.Owned = adm.Owns(rec.name)
	}
	if owner != nil {
		s.Owner = owner.Owner(rec.name)
	}
	n := &rec.note
	if at := n.probeAt.Load(); at != 0 {
		s.LastProbe = ProbeStatus{
			At:      time.Unix(0, at),
			Latency: time.Duration(n.probeLatency.Load()),
			Result:  probeResults[n.probeResult.Load()],
		}
	}
	if err := n.lastErr.Load(); err != nil {
		s.LastError, s.LastErrorAt = err.text, err.at
	}
	return s
}

// Clusters lists every known cluster and its state, sorted by name (see
// List for the rest).
func (e *Engine) Clusters() []Status {
	out := make([]Status, 0, e.records.len())
	for rec := range e.records.all() {
		if v := rec.view.Load(); v.state != StateGone && v.state != "" {
			out = append(out, Status{Name: rec.name, State: v.state})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// statusNote is what a listing shows of a record beyond its view: the last
// probe's answer and the last error. The probes write it without the
// engine's lock (a healthy answer takes none), one probe of a record at a
// time; a listing may read a probe's time with the previous probe's latency,
// never a torn value.
type statusNote struct {
	probeAt      atomic.Int64 // Unix nanoseconds of the last answer; 0: none yet
	probeLatency atomic.Int64 // nanoseconds
	probeResult  atomic.Int32 // a probeResult
	lastErr      atomic.Pointer[errNote]
}

// errNote is an error as listings show it: redacted once, when it happened.
type errNote struct {
	text string
	at   time.Time
}

// probed notes a probe's answer; err, if any, is the last error.
func (n *statusNote) probed(now time.Time, latency time.Duration, res probeResult, err error) {
	n.probeLatency.Store(int64(latency))
	n.probeResult.Store(int32(res))
	n.probeAt.Store(now.UnixNano())
	if err != nil {
		n.failed(now, err)
	}
}

// failed notes an error, redacted.
func (n *statusNote) failed(now time.Time, err error) {
	n.lastErr.Store(&errNote{text: redact.String(err.Error()), at: now})
}
