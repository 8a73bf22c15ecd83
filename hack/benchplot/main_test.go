package main

import (
	"strings"
	"testing"
)

// The parser keeps what it knows and skips what it does not: headers, logs,
// new metrics, values that are not numbers.
func TestParseIsTolerant(t *testing.T) {
	out := strings.Join([]string{
		"goos: linux",
		"cpu: Some CPU @ 2.0GHz",
		"BenchmarkEngage/clusters=100-2  1  91905868 ns/op  110.0 KB-heap/cluster  0.0919 s/all-reconciled",
		"    engage_test.go:99: a log line",
		"BenchmarkEngage/clusters=500-2  1  714320101 ns/op  n/a weird  109.4 KB-heap/cluster  0.71 s/all-reconciled  1.5 ms-cpu/reconcile  3.0 ms-cpu/reconcile-controller-runtime",
		"BenchmarkThroughput-2  1  7678054498 ns/op  2.103 ratio  389.5 reconciles/s-controller-runtime  819.1 reconciles/s-multicluster  75968744 B/op",
		"PASS",
		"ok  	github.com/mcruntime/multicluster-runtime/bench	12.3s",
	}, "\n")
	rs, err := parse(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 3 {
		t.Fatalf("parsed %d results, want 3: %+v", len(rs), rs)
	}
	if rs[1].family != "Engage" || rs[1].param != "clusters=500" || rs[1].metrics["s/all-reconciled"] != 0.71 || rs[1].metrics["ms-cpu/reconcile-controller-runtime"] != 3 {
		t.Fatalf("second result = %+v", rs[1])
	}
	if rs[2].family != "Throughput" || rs[2].param != "" || rs[2].metrics["reconciles/s-multicluster"] != 819.1 {
		t.Fatalf("third result = %+v", rs[2])
	}
}

// A plot has a value axis with its unit, the groups' parameters, a legend
// naming the reference, and a series per labelled run.
func TestDrawHasAxesUnitsAndReferences(t *testing.T) {
	this, _ := parse(strings.NewReader("BenchmarkEngage/clusters=100-2 1 1 ns/op 0.09 s/all-reconciled\nBenchmarkEngage/clusters=1000-2 1 1 ns/op 1.2 s/all-reconciled\n"))
	main, _ := parse(strings.NewReader("BenchmarkEngage/clusters=100-2 1 1 ns/op 0.1 s/all-reconciled\nBenchmarkEngage/clusters=1000-2 1 1 ns/op 1.9 s/all-reconciled\n"))
	svg, ok := draw(Plots[0], []run1{{label: "this", results: this}, {label: "main@1a2b", results: main}})
	if !ok {
		t.Fatal("no plot")
	}
	for _, want := range []string{"seconds (lower is better)", ">1000<", "clusters engaged at once", "multicluster-runtime (main@1a2b)", ">1.9<", ">1.2<"} {
		if !strings.Contains(svg, want) {
			t.Errorf("the plot lacks %q", want)
		}
	}
	if _, ok := draw(Plots[0], []run1{{results: nil}}); ok {
		t.Error("a plot was drawn without data")
	}
}

func TestTicks(t *testing.T) {
	for _, c := range []struct{ max, step, top float64 }{{4.917, 1, 5}, {819.1, 200, 1000}, {1.221, 0.25, 1.25}, {0, 1, 1}} {
		if step, top := ticks(c.max); step != c.step || top != c.top {
			t.Errorf("ticks(%v) = %v, %v; want %v, %v", c.max, step, top, c.step, c.top)
		}
	}
}

// With SCALE_ROUNDS, BenchmarkScale prints each round's lines beside the
// median lines: the plot draws the medians only.
func TestScaleRoundLinesAreNotPlotted(t *testing.T) {
	rs, err := parse(strings.NewReader(strings.Join([]string{
		"BenchmarkScale/clusters=2000/multicluster-round1-2 1 1 ns/op 7.5 s/all-reconciled",
		"BenchmarkScale/clusters=2000/client-go-round1-2 1 1 ns/op 6.5 s/all-reconciled",
		"BenchmarkScale/clusters=2000/multicluster-2 1 1 ns/op 5.25 s/all-reconciled",
		"BenchmarkScale/clusters=2000/client-go-2 1 1 ns/op 3.75 s/all-reconciled",
	}, "\n")))
	if err != nil || len(rs) != 4 || rs[0].param != "clusters=2000/multicluster-round1" {
		t.Fatalf("parse = %+v, %v", rs, err)
	}
	var p plot
	for _, p = range Plots {
		if p.file == "scale-all-reconciled" {
			break
		}
	}
	svg, ok := draw(p, []run1{{results: rs}})
	if !ok {
		t.Fatal("no plot")
	}
	if !strings.Contains(svg, ">5.25<") || !strings.Contains(svg, ">3.75<") {
		t.Error("the plot lacks the medians")
	}
	if strings.Contains(svg, ">7.5<") || strings.Contains(svg, ">6.5<") || strings.Contains(svg, "round") {
		t.Error("the plot has a round's line")
	}
}
