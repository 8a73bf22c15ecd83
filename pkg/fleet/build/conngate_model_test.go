package build

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// The connection gate over random schedules: clusters sharing a transport
// (a real *http.Transport whose dials the schedule decides: they connect,
// fail or hang as a TLS handshake does) send requests at random moments,
// watches and bounded requests, with and without context deadlines. Time is
// synctest's, so a bound is checked to the instant. Invariants:
//
//   - no request returns later than its bound (its context's deadline, and
//     for a request that is not long-running, its cluster's timeout);
//   - every request is released: none is still waiting an hour after the
//     last dial ended, and every gate a request entered is open afterwards;
//   - while a first connection is pending (a dial in progress, the gate
//     closed), no second dial starts on that transport.
//
// A failing seed prints itself with the step (the request) that broke an
// invariant; CONNGATE_SEED=<seed> reruns it alone.
func TestConnGateOverRandomSchedules(t *testing.T) {
	seeds := make([]uint64, 300)
	base := uint64(time.Now().UnixNano())
	for i := range seeds {
		seeds[i] = base + uint64(i)
	}
	if s := os.Getenv("CONNGATE_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CONNGATE_SEED=%q: %v", s, err)
		}
		seeds = []uint64{n}
	}
	for _, seed := range seeds {
		var err error
		synctest.Test(t, func(*testing.T) { err = runGateSchedule(seed) })
		if err != nil {
			t.Fatalf("seed %d, %v\nrerun alone: CONNGATE_SEED=%d go test -race -run TestConnGateOverRandomSchedules ./pkg/clusters/", seed, err, seed)
		}
	}
}

const (
	dialConnects = iota
	dialFails
	dialHangs // as a TLS handshake to a server that accepted and never answers
)

var dialKinds = [...]string{"connects", "fails", "hangs"}

type gateDial struct {
	kind  int
	after time.Duration
}

type gateRequest struct {
	step     int
	cluster  int
	at       time.Duration
	watch    bool
	deadline time.Duration // of the request's context; 0: none
	delay    time.Duration // before the server answers
}

func (r gateRequest) String() string {
	kind := "GET"
	if r.watch {
		kind = "watch"
	}
	return fmt.Sprintf("%s of cluster %d at %s, context deadline %s, server answers after %s", kind, r.cluster, r.at, r.deadline, r.delay)
}

// gateTransport is one shared transport of a schedule, its gate and what
// its dials do.
type gateTransport struct {
	host  string
	tr    *http.Transport
	gate  *connGate
	plan  []gateDial
	fail  func(step int, format string, args ...any)
	mu    sync.Mutex
	busy  int // dials in progress
	dials int
	conns []net.Conn // the server's ends
}

type stepKey struct{}

func (g *gateTransport) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	step, _ := ctx.Value(stepKey{}).(int)
	g.mu.Lock()
	if g.busy > 0 && !g.gate.open.Load() {
		g.fail(step, "a second dial to %s began while the first connection was pending", g.host)
	}
	d := gateDial{kind: dialConnects}
	if g.dials < len(g.plan) {
		d = g.plan[g.dials]
	}
	g.dials++
	g.busy++
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.busy--
		g.mu.Unlock()
	}()
	timer := time.NewTimer(d.after)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	switch d.kind {
	case dialFails:
		return nil, errors.New("connection refused")
	case dialHangs:
		return nil, errors.New("TLS handshake timeout")
	}
	client, server := net.Pipe()
	g.mu.Lock()
	g.conns = append(g.conns, server)
	g.mu.Unlock()
	go serveGate(server)
	return client, nil
}

// serveGate answers every request on c after the delay it asks for.
func serveGate(c net.Conn) {
	defer func() { _ = c.Close() }()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		delay, _ := time.ParseDuration(req.Header.Get("X-Delay"))
		time.Sleep(delay)
		if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"); err != nil {
			return
		}
	}
}

var errNeverReleased = errors.New("never released")

// runGateSchedule draws a schedule from seed and runs it; it must run in a
// synctest bubble.
func runGateSchedule(seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 0x9a7e))
	var mu sync.Mutex
	var failures []error
	fail := func(step int, format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, fmt.Errorf("step %d: "+format, append([]any{step}, args...)...))
	}
	ms := func(lo, hi int) time.Duration { return time.Duration(lo+rng.IntN(hi-lo+1)) * time.Millisecond }

	transports := make([]*gateTransport, 1+rng.IntN(2))
	for i := range transports {
		g := &gateTransport{host: fmt.Sprintf("member-%d.test", i), fail: fail}
		g.tr = &http.Transport{DialContext: g.dial}
		g.gate = connGateFor(g.tr, "http://"+g.host)
		for range rng.IntN(4) {
			d := gateDial{kind: rng.IntN(3), after: ms(0, 500)}
			if d.kind == dialHangs {
				d.after = ms(1000, 12000)
			}
			g.plan = append(g.plan, d)
		}
		transports[i] = g
	}
	// Clusters of one transport: each its own bounded transport (and timeout).
	type gateCluster struct {
		transport int
		rt        *boundedTransport
	}
	clusters := make([]gateCluster, 1+rng.IntN(4))
	for i := range clusters {
		ti := rng.IntN(len(transports))
		var timeout time.Duration // none, as WithRequestTimeout(0)
		if rng.IntN(4) > 0 {
			timeout = ms(50, 2000)
		}
		clusters[i] = gateCluster{ti, &boundedTransport{next: transports[ti].tr, timeout: timeout, gate: transports[ti].gate}}
	}
	requests := make([]gateRequest, 2+rng.IntN(15))
	for i := range requests {
		r := gateRequest{step: i, cluster: rng.IntN(len(clusters)), at: ms(0, 1500), watch: rng.IntN(3) == 0, delay: ms(0, 300)}
		if rng.IntN(2) == 0 {
			r.deadline = ms(20, 3000)
		}
		requests[i] = r
	}

	var wg sync.WaitGroup
	for _, r := range requests {
		c := clusters[r.cluster]
		g := transports[c.transport]
		wg.Go(func() {
			time.Sleep(r.at)
			ctx, cancel := context.WithTimeoutCause(context.Background(), time.Hour, errNeverReleased)
			defer cancel()
			bound := time.Duration(0)
			if r.deadline > 0 {
				ctx, cancel = context.WithTimeout(ctx, r.deadline)
				defer cancel()
				bound = r.deadline
			}
			if !r.watch && c.rt.timeout > 0 && (bound == 0 || c.rt.timeout < bound) {
				bound = c.rt.timeout
			}
			url := "http://" + g.host + "/api/v1/namespaces/default/configmaps"
			if r.watch {
				url += "?watch=true"
			}
			req, _ := http.NewRequestWithContext(context.WithValue(ctx, stepKey{}, r.step), http.MethodGet, url, nil)
			req.Header.Set("X-Delay", r.delay.String())
			start := time.Now()
			resp, err := c.rt.RoundTrip(req)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
			took := time.Since(start)
			switch {
			case errors.Is(context.Cause(ctx), errNeverReleased):
				fail(r.step, "request (%s, cluster timeout %s) was still waiting after an hour", r, c.rt.timeout)
			case bound > 0 && took > bound:
				fail(r.step, "request (%s, cluster timeout %s) returned after %s, past its bound of %s (dials of %s: %s)",
					r, c.rt.timeout, took, bound, g.host, g.describePlan())
			}
		})
	}
	wg.Wait()
	// Dials go on after the requests that began them gave up; let them end,
	// then close what they opened.
	time.Sleep(time.Minute)
	synctest.Wait()
	for i, g := range transports {
		g.tr.CloseIdleConnections()
		g.mu.Lock()
		for _, c := range g.conns {
			_ = c.Close()
		}
		g.mu.Unlock()
		entered := false
		for _, r := range requests {
			entered = entered || clusters[r.cluster].transport == i
		}
		if entered && !g.gate.open.Load() {
			fail(len(requests), "the gate of %s is still closed after every request returned: later ones would wait for good", g.host)
		}
	}
	synctest.Wait()
	if len(failures) > 0 {
		return fmt.Errorf("%w (schedule: %d requests over %d transports; %d failures)", failures[0], len(requests), len(transports), len(failures))
	}
	return nil
}

func (g *gateTransport) describePlan() string {
	s := ""
	for i, d := range g.plan {
		s += fmt.Sprintf("#%d %s after %s; ", i+1, dialKinds[d.kind], d.after)
	}
	return s + "then connects"
}
