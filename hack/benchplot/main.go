// Command benchplot draws the book's benchmark plots from the output of
// `make bench` (go test -bench): one SVG bar chart per metric, one bar per
// benchmark that reports it, so the figures in docs/advanced/performance.md
// are the figures of a real run.
//
//	go run ./hack/benchplot -in docs/advanced/bench-output.txt -out docs/images
package main

import (
	"bufio"
	"flag"
	"fmt"
	"html"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// DefaultMetrics are the metrics the book plots; each becomes bench-<metric>.svg.
var DefaultMetrics = []string{
	"s/all-reconciled",
	"KB-heap/cluster",
	"ms-p50/join-first-reconcile",
	"ms-p99/join-first-reconcile",
	"ratio",
	// CPU and scale figures: every benchmark reporting them prints one line
	// per kind (multicluster, controller-runtime, client-go), so each bar
	// stands beside its reference measured in the same run.
	"µs-cpu/reconcile",
	"ns-cpu/event",
	"ms-cpu/cluster",
	"goroutines/cluster",
	"%core-idle",
}

type point struct {
	name  string
	value float64
}

func main() {
	in := flag.String("in", "", "benchmark output (default: standard input)")
	out := flag.String("out", "docs/images", "directory for the SVG files")
	metrics := flag.String("metrics", strings.Join(DefaultMetrics, ","), "comma-separated metric units to plot")
	flag.Parse()
	if err := run(*in, *out, strings.Split(*metrics, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "benchplot:", err)
		os.Exit(1)
	}
}

func run(in, out string, metrics []string) error {
	r := io.Reader(os.Stdin)
	if in != "" {
		f, err := os.Open(in)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		r = f
	}
	series, err := parse(r)
	if err != nil {
		return err
	}
	for _, m := range metrics {
		pts := series[m]
		if len(pts) == 0 {
			fmt.Fprintf(os.Stderr, "benchplot: no benchmark reports %q; no plot drawn for it\n", m)
			continue
		}
		path := filepath.Join(out, "bench-"+fileName(m)+".svg")
		if err := os.WriteFile(path, []byte(draw(m, pts)), 0o644); err != nil {
			return err
		}
		fmt.Println(path)
	}
	return nil
}

var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

// parse reads "BenchmarkX/sub-2  1  123 ns/op  4.5 unit ..." lines, by metric.
func parse(r io.Reader) (map[string][]point, error) {
	series := map[string][]point{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		name := strings.TrimPrefix(m[1], "Benchmark")
		fields := strings.Fields(m[2])
		for i := 0; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				break
			}
			series[fields[i+1]] = append(series[fields[i+1]], point{name: name, value: v})
		}
	}
	return series, sc.Err()
}

func fileName(metric string) string {
	return strings.Trim(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(metric, "-"), "-")
}

// draw renders a horizontal bar chart.
func draw(metric string, pts []point) string {
	const (
		labelW = 330
		barW   = 380
		rowH   = 26
		top    = 40
	)
	maxV := 0.0
	for _, p := range pts {
		maxV = max(maxV, p.value)
	}
	if maxV == 0 {
		maxV = 1
	}
	h := top + rowH*len(pts) + 20
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="12">`+"\n",
		labelW+barW+110, h, labelW+barW+110, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#fff"/>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="22" font-size="14" font-weight="bold">%s</text>`+"\n", html.EscapeString(metric))
	for i, p := range pts {
		y := top + i*rowH
		w := p.value / maxV * barW
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", labelW-8, y+16, html.EscapeString(p.name))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="#5b7db1"/>`+"\n", labelW, y+3, w, rowH-8)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d">%s</text>`+"\n", float64(labelW)+w+6, y+16, strconv.FormatFloat(p.value, 'g', 4, 64))
	}
	b.WriteString("</svg>\n")
	return b.String()
}
