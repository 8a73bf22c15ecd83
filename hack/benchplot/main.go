// Command benchplot draws the book's benchmark plots from the output of
// `make bench` (go test -bench): grouped bar charts with a value axis, units
// and a legend, one bar per series, so the figures in
// docs/advanced/performance.md are the figures of a real run and show the
// references measured beside them.
//
//	go run ./hack/benchplot -in docs/advanced/bench-output.txt -out docs/images
//	go run ./hack/benchplot -in this=new.txt -in main@1a2b3c=old.txt -out docs/images
//
// A reference is either measured by the same benchmark and reported under a
// suffixed unit (reconciles/s-controller-runtime beside reconciles/s-multicluster),
// or a whole run of another revision given as a second labelled -in, made on
// the same machine one after the other. Lines that are not benchmark results,
// and metrics no plot uses, are ignored, so new benchmarks and new metrics do
// not break the plots.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// A plot draws metrics of one benchmark family, grouped by a sub-benchmark
// parameter (or one group when the family has none).
type plot struct {
	file   string   // bench-<file>.svg
	title  string   // what is measured
	family string   // benchmark name without "Benchmark" and sub-benchmarks
	axis   string   // value axis title, with its unit
	xaxis  string   // what the groups are
	series []series // metrics drawn, in legend order
	// group, if set, is the one sub-benchmark parameter drawn: the size the
	// reference was measured at.
	group string
}

type series struct {
	unit  string // the unit reported by b.ReportMetric
	label string // legend
	// kind, if set, is the last element of the sub-benchmark name that this
	// series reads (BenchmarkDrain/workers=8/controller-runtime): benchmarks
	// that measure a reference in the same run print it on a line of its own.
	kind string
}

// Plots are the book's figures.
var Plots = []plot{
	{file: "engage-all-reconciled", family: "Engage", title: "Engaging a fleet: time until every ConfigMap of every cluster is reconciled",
		axis: "seconds (lower is better)", xaxis: "clusters engaged at once", series: []series{{"s/all-reconciled", "multicluster-runtime", ""}}},
	{file: "engage-heap", family: "Engage", title: "Heap per engaged cluster, beyond its cached objects",
		axis: "KB per cluster (lower is better)", xaxis: "clusters engaged", series: []series{{"KB-heap/cluster", "multicluster-runtime", ""}}},
	{file: "engage-join", family: "Engage", title: "One more cluster joining the fleet: engage to first reconcile",
		axis: "milliseconds (lower is better)", xaxis: "clusters already engaged",
		series: []series{{"ms-p50/join-first-reconcile", "p50", ""}, {"ms-p99/join-first-reconcile", "p99", ""}}},
	{file: "throughput", family: "Throughput", title: "Creates reconciled per second: 10 clusters beside controller-runtime on one, same run",
		axis: "reconciles per second (higher is better)", xaxis: "",
		series: []series{{"reconciles/s-multicluster", "multicluster-runtime, 10 clusters", ""}, {"reconciles/s-controller-runtime", "controller-runtime, 1 cluster (reference)", ""}}},
	{file: "drain-cpu", family: "Drain", title: "CPU per reconcile while draining 20,000 requests over 10 clusters, same run",
		axis: "µs of CPU per reconcile (lower is better)", xaxis: "workers",
		series: []series{{"µs-cpu/reconcile", "multicluster-runtime, fair queue", "fair"}, {"µs-cpu/reconcile", "multicluster-runtime, controller-runtime's queue", "plainqueue"}, {"µs-cpu/reconcile", "plain controller-runtime (reference)", "controller-runtime"}}},
	{file: "event-cpu", family: "EventPath", title: "CPU per informer event until its request is queued, same run",
		axis: "ns of CPU per event (lower is better)", xaxis: "",
		series: []series{{"ns-cpu/event", "multicluster-runtime", "fair"}, {"ns-cpu/event", "plain controller-runtime (reference)", "controller-runtime"}}},
	scalePlot("scale-all-reconciled", "Clusters known at start-up: time until every object is reconciled",
		"seconds (lower is better)", "s/all-reconciled", "multicluster-runtime"),
	scalePlot("scale-cpu", "CPU per cluster until every object is reconciled",
		"ms of CPU per cluster (lower is better)", "ms-cpu/cluster", "multicluster-runtime"),
	scalePlot("scale-heap", "Heap per cluster once every object is reconciled",
		"KB per cluster (lower is better)", "KB-heap/cluster", "multicluster-runtime"),
	scalePlot("scale-idle", "Idle CPU over two probe intervals once every object is reconciled",
		"% of one core (lower is better)", "%core-idle", "multicluster-runtime (health probes on)"),
	{file: "scale-engine-lock", family: "Scale", title: "Waits for the fleet engine's lock until every object is reconciled, summed over goroutines",
		axis: "µs waited per cluster (lower is better)", xaxis: "clusters",
		series: []series{{"µs-engine-lock/cluster", "multicluster-runtime", "multicluster"}}},
	objectsPlot("scale-objects-heap", "Heap per cluster with 250 objects written with server-side apply, beside bare client-go informers",
		"KB per cluster (lower is better)", "KB-heap/cluster"),
	objectsPlot("scale-objects-event-cpu", "CPU per update event with 250 objects per cluster, beside bare client-go informers",
		"µs of CPU per event (lower is better)", "µs-cpu/event"),
	objectsPlot("scale-objects-all-reconciled", "Clusters with 250 objects each: time until every object is reconciled",
		"seconds (lower is better)", "s/all-reconciled"),
	fleetPlot("fleet-heap", "Heap per member once every object is reconciled: a simulated fleet of distinct servers and identities",
		"KB per member (lower is better)", "KB-heap/cluster"),
	fleetPlot("fleet-cpu", "CPU per member until every object is reconciled: a simulated fleet",
		"ms of CPU per member (lower is better)", "ms-cpu/cluster"),
	fleetPlot("fleet-event-cpu", "CPU per update event: a simulated fleet",
		"µs of CPU per event (lower is better)", "µs-cpu/event"),
	fleetPlot("fleet-all-reconciled", "Time until every object of every member is reconciled: a simulated fleet",
		"seconds (lower is better)", "s/all-reconciled"),
	{file: "probe-cpu", family: "ProbeCost", title: "CPU per health probe, 1,000 engaged clusters at the default interval",
		axis: "µs of CPU per probe (lower is better)", xaxis: "",
		series: []series{{"cpu-µs/probe", "multicluster-runtime", ""}}},
}

// scalePlot draws a metric of the Scale benchmark by fleet size, beside the
// same metric of bare client-go informers measured in the same run: the floor
// that any controller over the same objects pays.
func scalePlot(file, title, axis, unit, label string) plot {
	return plot{file: file, family: "Scale", title: title, axis: axis, xaxis: "clusters", series: []series{
		{unit, label, "multicluster"}, {unit, "bare client-go informers (floor)", "client-go"},
	}}
}

// objectsPlot draws a metric of the ScaleObjects benchmark by fleet size and
// objects per cluster, beside bare client-go informers with their defaults
// measured in the same run.
func objectsPlot(file, title, axis, unit string) plot {
	return plot{file: file, family: "ScaleObjects", title: title, axis: axis, xaxis: "clusters x objects per cluster", series: []series{
		{unit, "multicluster-runtime (member caches: no managed fields, shared strings, no gzip)", "multicluster"},
		{unit, "bare client-go informers, defaults (floor)", "client-go"},
	}}
}

// fleetPlot draws a metric of BenchmarkFleet (bench/fleetsim's simulated
// fleet, one process per side, medians over rounds) by fleet size: the
// library's two paths and controller-runtime's cluster.New beside the
// client-go floor, with client-go's defaults and tuned as the library's
// caches are.
func fleetPlot(file, title, axis, unit string) plot {
	return plot{file: file, family: "Fleet", title: title, axis: axis, xaxis: "members x 250 objects each", series: []series{
		{unit, "multicluster-runtime, NewCluster", "library"},
		{unit, "multicluster-runtime, custom provider (Add)", "adopted-concurrent"},
		{unit, "multicluster-runtime over cluster.New", "controller-runtime"},
		{unit, "bare client-go informers, defaults (floor)", "client-go"},
		{unit, "bare client-go, protobuf, no gzip, no managed fields", "client-go-tuned"},
	}}
}

// result is one benchmark line: family, sub-benchmark parameter, metrics.
type result struct {
	family, param string
	metrics       map[string]float64
}

// inputs is a repeatable -in flag: "path" or "label=path".
type inputs []string

func (i *inputs) String() string     { return strings.Join(*i, ",") }
func (i *inputs) Set(v string) error { *i = append(*i, v); return nil }

func main() {
	var in inputs
	flag.Var(&in, "in", "benchmark output, as path or label=path (path - is standard input); repeat it for references from other revisions (default: standard input)")
	out := flag.String("out", "docs/images", "directory for the SVG files")
	flag.Parse()
	if err := run(in, *out); err != nil {
		fmt.Fprintln(os.Stderr, "benchplot:", err)
		os.Exit(1)
	}
}

// run1 is one run's results and the label of its revision.
type run1 struct {
	label   string
	results []result
}

func run(in inputs, out string) error {
	var runs []run1
	if len(in) == 0 {
		rs, err := parse(os.Stdin)
		if err != nil {
			return err
		}
		runs = append(runs, run1{results: rs})
	}
	for _, spec := range in {
		label, path, ok := strings.Cut(spec, "=")
		if !ok {
			label, path = "", spec
		}
		var rs []result
		var err error
		if path == "-" {
			rs, err = parse(os.Stdin)
		} else {
			f, openErr := os.Open(path)
			if openErr != nil {
				return openErr
			}
			rs, err = parse(f)
			_ = f.Close()
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		runs = append(runs, run1{label: label, results: rs})
	}
	for _, p := range Plots {
		svg, ok := draw(p, runs)
		if !ok {
			fmt.Fprintf(os.Stderr, "benchplot: no benchmark reports the metrics of %s; no plot drawn\n", p.file)
			continue
		}
		path := filepath.Join(out, "bench-"+p.file+".svg")
		if err := os.WriteFile(path, []byte(svg), 0o644); err != nil {
			return err
		}
		fmt.Println(path)
	}
	return nil
}

var benchLine = regexp.MustCompile(`^Benchmark([^\s/]+?)(?:/(\S+?))?(?:-\d+)?\s+\d+\s+(.*)$`)

// parse reads "BenchmarkX/sub-2  1  123 ns/op  4.5 unit ..." lines. Anything
// else (headers, logs, PASS) is skipped, and so is a value that is not a
// number, with the rest of its line kept.
func parse(r io.Reader) ([]result, error) {
	var out []result
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		res := result{family: m[1], param: m[2], metrics: map[string]float64{}}
		fields := strings.Fields(m[3])
		for i := 0; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				i-- // realign on the next number
				continue
			}
			res.metrics[fields[i+1]] = v
		}
		out = append(out, res)
	}
	return out, sc.Err()
}
