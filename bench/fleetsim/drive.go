package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
)

// driveOptions make fleetsim drive the benchmark once its fleet serves:
// every side of bench's BenchmarkFleet in a process of its own (the test
// binary, built with go test -c), one side at a time, in rounds whose order
// rotates (round 1 a b c, round 2 b c a, ...), each side once the API
// servers' long-running requests are back at what they were before the
// first. Each side's figures are compared with the floor's of the same round
// (client-go, or client-go-serial for a serial side; and, for a concurrent
// side of the library, client-go-tuned as tuned-*-ratio); the lines printed are
// Go benchmark lines, one per side and round and one per side with the
// medians over the rounds and, for the ratios, their min and max.
type driveOptions struct {
	binary string
	sides  string
	rounds int
	out    string
}

func (d *driveOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&d.binary, "drive", "", "bench's test binary (go test -c ./bench): run BenchmarkFleet's sides against the fleet, then stop")
	fs.StringVar(&d.sides, "sides", "client-go,library,adopted-concurrent,controller-runtime", "sides to run, comma-separated (see bench/fleet_test.go)")
	fs.IntVar(&d.rounds, "rounds", 3, "rounds of every side")
	fs.StringVar(&d.out, "out", "", "also write the figures to this file")
}

// floorOf is the side whose figures side's are divided by.
func floorOf(side string) string {
	if strings.HasSuffix(side, "-serial") {
		return "client-go-serial"
	}
	return "client-go"
}

// line is one benchmark line's figures, in order, or why the side failed
// in that round.
type line struct {
	units  []string
	values map[string]float64
	failed string
}

func (d driveOptions) run(ctx context.Context, manifest string, o options, admin *kubernetes.Clientset) error {
	sides := strings.Split(d.sides, ",")
	base, err := longRunning(ctx, admin)
	if err != nil {
		return err
	}
	results := map[string][]line{}
	for r := range d.rounds {
		order := append(slices.Clone(sides[r%len(sides):]), sides[:r%len(sides)]...)
		for _, side := range order {
			waitIdle(ctx, admin, base)
			l, err := d.side(ctx, manifest, side, r+1)
			if err != nil {
				if ctx.Err() != nil {
					return fmt.Errorf("side %s, round %d: %w", side, r+1, err)
				}
				// A side that fails is a figure too: the other sides, and
				// the rounds after, still run.
				log.Printf("side %s, round %d failed: %v", side, r+1, err)
				l = line{failed: err.Error()}
			}
			results[side] = append(results[side], l)
		}
		// After every round, the figures so far: a run cut short keeps them.
		if err := d.write(results, sides, o, r+1, r+1 == d.rounds); err != nil {
			return err
		}
	}
	return nil
}

// write prints the figures of the rounds done (and writes them to -out).
func (d driveOptions) write(results map[string][]line, sides []string, o options, rounds int, last bool) error {
	var out bytes.Buffer
	fmt.Fprintf(&out, "goos: linux\ngoarch: amd64\npkg: github.com/mcruntime/multicluster-runtime/bench\n")
	fmt.Fprintf(&out, "# fleetsim: %d members on %d API server(s), %d ConfigMaps and %d Deployments each, %d ConfigMaps updated per member; %d rounds\n",
		o.members, o.servers, o.configMaps, o.deployments, o.update, rounds)
	prefix := fmt.Sprintf("BenchmarkFleet/members=%d/", o.members)
	for _, side := range sides {
		floor, tuned := results[floorOf(side)], results["client-go-tuned"]
		var rounds []line
		if len(results[side]) == 0 {
			continue
		}
		for r, l := range results[side] {
			if l.failed != "" {
				fmt.Fprintf(&out, "# %s%s-round%d failed: %s\n", prefix, side, r+1, l.failed)
				continue
			}
			if side != floorOf(side) && r < len(floor) {
				l = withRatios(l, floor[r], "")
			}
			if !strings.HasPrefix(side, "client-go") && !strings.HasSuffix(side, "-serial") && r < len(tuned) {
				l = withRatios(l, tuned[r], "tuned-")
			}
			rounds = append(rounds, l)
			writeLine(&out, fmt.Sprintf("%s%s-round%d", prefix, side, r+1), l, nil)
		}
		if len(rounds) > 0 {
			writeLine(&out, prefix+side, medians(rounds), rounds)
		}
	}
	if last {
		os.Stdout.Write(out.Bytes())
	}
	if d.out != "" {
		return os.WriteFile(d.out, out.Bytes(), 0o644)
	}
	return nil
}

// ratioOf names the ratio of each figure compared with the floor.
var ratioOf = map[string]string{
	"s/all-reconciled": "time-ratio",
	"ms-cpu/cluster":   "cpu-ratio",
	"KB-heap/cluster":  "heap-ratio",
	"µs-cpu/event":     "event-cpu-ratio",
}

// withRatios adds to l its ratios to floor's figures, named prefix+ratioOf.
func withRatios(l, floor line, prefix string) line {
	out := line{units: slices.Clone(l.units), values: map[string]float64{}}
	for u, v := range l.values {
		out.values[u] = v
	}
	for _, u := range l.units {
		if ratio, ok := ratioOf[u]; ok && floor.values[u] != 0 {
			ratio = prefix + ratio
			out.units = append(out.units, ratio)
			out.values[ratio] = l.values[u] / floor.values[u]
		}
	}
	return out
}

func medians(rounds []line) line {
	out := line{units: rounds[0].units, values: map[string]float64{}}
	for _, u := range out.units {
		var vs []float64
		for _, r := range rounds {
			vs = append(vs, r.values[u])
		}
		slices.Sort(vs)
		n := len(vs)
		if n%2 == 1 {
			out.values[u] = vs[n/2]
		} else {
			out.values[u] = (vs[n/2-1] + vs[n/2]) / 2
		}
	}
	return out
}

// writeLine writes a benchmark line; with rounds, every ratio's min and max
// over them follow.
func writeLine(w io.Writer, name string, l line, rounds []line) {
	fmt.Fprintf(w, "%s \t       1", name)
	for _, u := range l.units {
		fmt.Fprintf(w, "\t%12.4g %s", l.values[u], u)
		if !strings.HasSuffix(u, "-ratio") || len(rounds) < 2 {
			continue
		}
		lo, hi := rounds[0].values[u], rounds[0].values[u]
		for _, r := range rounds {
			lo, hi = min(lo, r.values[u]), max(hi, r.values[u])
		}
		fmt.Fprintf(w, "\t%12.4g %s-min\t%12.4g %s-max", lo, u, hi, u)
	}
	fmt.Fprintln(w)
}

// side runs one side of BenchmarkFleet in a process of its own and returns
// its line.
func (d driveOptions) side(ctx context.Context, manifest, side string, round int) (line, error) {
	log.Printf("round %d: %s", round, side)
	cmd := exec.CommandContext(ctx, d.binary, "-test.run", "^$", "-test.bench", "^BenchmarkFleet$", "-test.benchtime", "1x", "-test.timeout", "40m")
	cmd.Env = append(os.Environ(), "FLEET="+manifest, "FLEET_SIDE="+side, fmt.Sprintf("FLEET_ROUND=%d", round))
	var stdout bytes.Buffer
	cmd.Stdout = io.MultiWriter(&stdout, os.Stderr)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return line{}, fmt.Errorf("%w%s", err, failure(stdout.String()))
	}
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "BenchmarkFleet/") {
			continue
		}
		l := line{values: map[string]float64{}}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return line{}, fmt.Errorf("%q: %w", sc.Text(), err)
			}
			l.units = append(l.units, f[i+1])
			l.values[f[i+1]] = v
		}
		return l, nil
	}
	return line{}, fmt.Errorf("no BenchmarkFleet line in its output")
}

// failure is what a failed side's output says went wrong: its test's
// messages (file:line: ...), each bounded, or nothing.
func failure(out string) string {
	var msgs []string
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if i := strings.Index(l, "_test.go:"); i > 0 && !strings.Contains(l[:i], " ") {
			if len(l) > 400 {
				l = l[:400] + "..."
			}
			msgs = append(msgs, l)
		}
	}
	if len(msgs) > 3 {
		msgs = msgs[:3]
	}
	if len(msgs) == 0 {
		return ""
	}
	return ": " + strings.Join(msgs, "; ")
}

// longRunning is the sum of the API server's apiserver_longrunning_requests
// (watches, mostly).
func longRunning(ctx context.Context, admin *kubernetes.Clientset) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	body, err := admin.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading the API server's /metrics: %w", err)
	}
	sum := 0.0
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		t := sc.Text()
		if !strings.HasPrefix(t, "apiserver_longrunning_requests{") {
			continue
		}
		f := strings.Fields(t)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return int(sum), nil
}

// waitIdle waits, up to two minutes, until server 0's long-running requests
// are back at base: the previous side's watches closed on the server too.
func waitIdle(ctx context.Context, admin *kubernetes.Clientset, base int) {
	start := time.Now()
	for time.Since(start) < 2*time.Minute && ctx.Err() == nil {
		n, err := longRunning(ctx, admin)
		if err == nil && n <= base {
			log.Printf("idle after %.1fs (%d long-running requests)", time.Since(start).Seconds(), n)
			time.Sleep(2 * time.Second)
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	log.Printf("not idle after 2m; measuring anyway")
}
