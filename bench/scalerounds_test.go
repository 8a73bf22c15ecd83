package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// scaleRounds is SCALE_ROUNDS, the number of times BenchmarkScale measures
// each size (default 1).
func scaleRounds(b *testing.B) int {
	s := os.Getenv("SCALE_ROUNDS")
	if s == "" {
		return 1
	}
	k, err := strconv.Atoi(s)
	if err != nil || k < 1 {
		b.Fatalf("SCALE_ROUNDS=%q: want a count of at least 1", s)
	}
	return k
}

// alternateResultRounds is alternateRounds for sides that return their
// results: it measures the library's side and the floor in
// alternated rounds (round 1 the library first, round 2 the floor first,
// ...), each side once the process and the API server are back at idle
// (waitIdle; the library's side is named library in its log line), and
// reports each round's lines when there are several (multicluster-roundR
// with beside's figures, client-go-roundR with the floor's for n clusters)
// and the medians (multicluster, client-go). Sides get their round, from 1.
func alternateResultRounds(b *testing.B, n, rounds int, idle idleState, library string,
	libSide, floorSide func(round int) scaleResult, beside func(mc, floor scaleResult) []figure) {
	var mcRounds, floorRounds [][]figure
	for r := range rounds {
		var mc, floor scaleResult
		sides := []func(){
			func() { waitIdle(b, idle, library); mc = libSide(r + 1) },
			func() { waitIdle(b, idle, "client-go"); floor = floorSide(r + 1) },
		}
		if r%2 == 1 {
			slices.Reverse(sides)
		}
		for _, side := range sides {
			side()
		}
		mcRounds = append(mcRounds, beside(mc, floor))
		floorRounds = append(floorRounds, floor.figures(n))
		if rounds > 1 {
			report(b, fmt.Sprintf("multicluster-round%d", r+1), mcRounds[r]...)
			report(b, fmt.Sprintf("client-go-round%d", r+1), floorRounds[r]...)
		}
	}
	waitIdle(b, idle, "what follows") // the next size or mode, or the leak check
	report(b, "multicluster", medianFigures(mcRounds, rounds > 1)...)
	report(b, "client-go", medianFigures(floorRounds, false)...)
}

// ratioUnits are the figures of the multicluster line that are ratios to the
// floor of the same round: with several rounds, their median line also
// carries their min and max (unit-min, unit-max) to show the spread.
var ratioUnits = []string{"time-ratio", "cpu-ratio", "heap-ratio", "event-cpu-ratio"}

// medianFigures is, for each unit of the rounds' lines (every round reports
// the same units in the same order), the median over the rounds; with spread,
// the min and max of each of ratioUnits follow.
func medianFigures(rounds [][]figure, spread bool) []figure {
	out := make([]figure, len(rounds[0]))
	for i, f := range rounds[0] {
		vs := make([]float64, len(rounds))
		for r := range rounds {
			vs[r] = rounds[r][i].value
		}
		slices.Sort(vs)
		out[i] = figure{medianSorted(vs), f.unit}
		if spread && slices.Contains(ratioUnits, f.unit) {
			out = append(out, figure{vs[0], f.unit + "-min"}, figure{vs[len(vs)-1], f.unit + "-max"})
		}
	}
	return out
}

// medianSorted is the median of sorted values; of an even count, the mean
// of the middle two.
func medianSorted(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// idleWaitLimit bounds how long a side of BenchmarkScale waits for the
// previous side's leftovers to go.
const idleWaitLimit = 2 * time.Minute

// idleState is what the process and the API server hold when no side of
// BenchmarkScale runs: the process's goroutines and the API server's
// long-running requests (watches, mostly). Teardown is asynchronous on both
// ends (informers stop, watch streams close, the server notices and lets its
// watchers go), so without waiting for it a side would pay for the previous
// one's leftovers: the server's CPU, on the same two cores, and its watch
// fan-out.
//
// It also holds the TCP connections open to the API server: the side that
// found the previous side's connections still pooled made no TLS handshakes,
// while a side starting with none makes up to one per cluster (every informer
// that starts before the first connection is up dials its own; at 2,000
// clusters, 1.2-2.1 s of the side's 1.7-4.6 s of CPU): each side starts with
// none of its own.
type idleState struct {
	goroutines  int
	longRunning int
	connections int
}

// idleBaseline is the idle state before the first side: metricsClient's
// connection open, the shared transport's pooled connections (the seed's)
// closed, read until two readings agree (at most five seconds).
func idleBaseline(b *testing.B) idleState {
	last := measureIdle(b) // opens metricsClient's connection
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		closeIdleConnections()
		time.Sleep(200 * time.Millisecond)
		now := measureIdle(b)
		if now == last {
			break
		}
		last = now
	}
	return last
}

// measureIdle reads the idle state now: the API server's long-running
// requests, then the goroutines (metricsClient's connection, kept open, is
// among them at every reading).
func measureIdle(b *testing.B) idleState {
	lr, err := longRunningRequests()
	if err != nil {
		b.Fatal(err)
	}
	conns, err := apiServerConnections()
	if err != nil {
		b.Fatal(err)
	}
	return idleState{goroutines: goroutinesBesideConnections(), longRunning: lr, connections: conns}
}

// apiServerConnections counts the machine's established TCP connections to
// the API server's port: the process's, metricsClient's included, and the
// API server's own loopback ones.
func apiServerConnections() (int, error) {
	u, err := url.Parse(config().Host)
	if err != nil {
		return 0, err
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		return 0, fmt.Errorf("the API server's port in %q: %w", config().Host, err)
	}
	suffix := fmt.Sprintf(":%04X", port)
	n := 0
	for _, path := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		body, err := os.ReadFile(path)
		if err != nil {
			return 0, err
		}
		// "sl local_address rem_address st ...", addresses as HEXIP:HEXPORT,
		// state 01 for established.
		for line := range strings.Lines(string(body)) {
			f := strings.Fields(line)
			if len(f) > 3 && strings.HasSuffix(f[2], suffix) && f[3] == "01" {
				n++
			}
		}
	}
	return n, nil
}

// goroutinesBesideConnections counts the process's goroutines other than the
// read loops of HTTP connections. Closing the shared transport's idle
// connections ends most of those, but not all: after the library's side one
// connection (of a transport that is not the shared one) stays until its idle
// timeout, 70 s more (seen at 50 clusters). An idle connection costs no CPU,
// so waiting for it would only make the benchmark longer.
func goroutinesBesideConnections() int {
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		return runtime.NumGoroutine()
	}
	// debug=1: records "COUNT @ PCS" followed by "#\tPC\tFUNC+OFF\tFILE:LINE"
	// lines, separated by blank lines.
	total, count := 0, 0
	sc := bufio.NewScanner(&buf)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if head, _, ok := strings.Cut(line, " @ "); ok {
			count, _ = strconv.Atoi(head)
			total += count
			continue
		}
		if strings.Contains(line, "(*ClientConn).readLoop") || strings.Contains(line, "(*persistConn).readLoop") ||
			strings.Contains(line, "(*persistConn).writeLoop") {
			total -= count
			count = 0 // once per record
		}
	}
	return total
}

// metricsClient reads the API server's /metrics over a transport of its own:
// on the transport that client-go shares among configs with the same
// credentials (the one the sides use), each reading would open a connection
// after waitIdle closed the idle ones, and count its goroutines.
var metricsClient = sync.OnceValues(func() (*http.Client, error) {
	cfg := config()
	// A config with its own Dial gets a transport of its own, not one from
	// client-go's cache.
	cfg.Dial = (&net.Dialer{Timeout: 10 * time.Second}).DialContext
	return rest.HTTPClientFor(cfg)
})

// waitIdle waits, up to idleWaitLimit, until the goroutines, the API
// server's long-running requests and the connections to it are back at base
// or below, closing idle pooled connections meanwhile, and logs how long it
// waited, and what was left if it timed out.
func waitIdle(b *testing.B, base idleState, before string) {
	start := time.Now()
	deadline := start.Add(idleWaitLimit)
	// When each was last seen above its baseline, to tell which one the wait
	// was for.
	var goroutinesBack, requestsBack, connectionsBack time.Duration
	for {
		closeIdleConnections()
		now := measureIdle(b)
		if now.goroutines > base.goroutines {
			goroutinesBack = time.Since(start)
		}
		if now.longRunning > base.longRunning {
			requestsBack = time.Since(start)
		}
		if now.connections > base.connections {
			connectionsBack = time.Since(start)
		}
		if now.goroutines <= base.goroutines && now.longRunning <= base.longRunning && now.connections <= base.connections {
			b.Logf("before %s: idle after %.1fs (back after: goroutines %.1fs, long-running requests %.1fs, connections %.1fs; now %+v, baseline %+v)",
				before, time.Since(start).Seconds(), goroutinesBack.Seconds(), requestsBack.Seconds(), connectionsBack.Seconds(), now, base)
			return
		}
		if time.Now().After(deadline) {
			b.Logf("before %s: TIMED OUT after %s waiting for idle: now %+v, baseline %+v; measuring anyway",
				before, idleWaitLimit, now, base)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// longRunningRequests is the sum of the API server's
// apiserver_longrunning_requests gauge (every verb, resource and scope), from
// its /metrics read with the fleet's admin credentials.
func longRunningRequests() (int, error) {
	hc, err := metricsClient()
	if err != nil {
		return 0, err
	}
	// Generous: right after a side of a thousand clusters, on two loaded
	// cores, the API server took more than 10 s to answer, which failed
	// the benchmark between two rounds; the read is outside every measure.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(config().Host, "/")+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("reading the API server's /metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("reading the API server's /metrics: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("reading the API server's /metrics: %s: %.200s", resp.Status, body)
	}
	return sumGauge(body, "apiserver_longrunning_requests")
}

// sumGauge sums the samples of a metric in Prometheus' text format.
func sumGauge(body []byte, name string) (int, error) {
	sum, found := 0.0, false
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("metric %s: %q: %w", name, line, err)
		}
		sum, found = sum+v, true
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("the API server's /metrics has no %s", name)
	}
	return int(sum), nil
}

// cpuProfile starts a CPU profile written to DIR/NAME.cpu when
// SCALE_CPUPROFILE=DIR is set, and returns what stops it (once: a side also
// defers it, for a benchmark that fails before it stops the profile).
func cpuProfile(b *testing.B, name string) (stop func()) {
	dir := os.Getenv("SCALE_CPUPROFILE")
	if dir == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(dir, name+".cpu"))
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			if err := f.Close(); err != nil {
				b.Error(err)
			}
		})
	}
}

// alternateRounds measures the library's side (mc) and the floor's in
// rounds, alternating which goes first (round 1 the library, round 2 the
// floor, ...), each after waitIdle; after each round, figures gives the two
// lines of that round. With more than one round, each round's lines are
// reported (KIND-roundR); then, after the last side's teardown, the median
// lines (see medianFigures).
func alternateRounds(b *testing.B, rounds int, idle idleState, mc, floor func(round int), figures func() (mc, floor []figure)) {
	var mcRounds, floorRounds [][]figure
	for r := range rounds {
		sides := []func(){
			func() { waitIdle(b, idle, "multicluster"); mc(r + 1) },
			func() { waitIdle(b, idle, "client-go"); floor(r + 1) },
		}
		if r%2 == 1 {
			slices.Reverse(sides)
		}
		for _, side := range sides {
			side()
		}
		m, f := figures()
		mcRounds, floorRounds = append(mcRounds, m), append(floorRounds, f)
		if rounds > 1 {
			report(b, fmt.Sprintf("multicluster-round%d", r+1), m...)
			report(b, fmt.Sprintf("client-go-round%d", r+1), f...)
		}
	}
	waitIdle(b, idle, "what follows") // the next size, or the leak check
	report(b, "multicluster", medianFigures(mcRounds, rounds > 1)...)
	report(b, "client-go", medianFigures(floorRounds, false)...)
}
