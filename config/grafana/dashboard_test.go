// Package grafana holds the Grafana dashboard of a multicluster-runtime
// controller (fleet-dashboard.json); its test checks every query against the
// metrics the library registers.
package grafana

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	"github.com/mcruntime/multicluster-runtime/providers/nop"
)

// Every PromQL query of the dashboard names only metrics that a manager with
// a multi-cluster controller registers in controller-runtime's registry, the
// one its metrics endpoint serves; and the dashboard shows each fleet metric
// the issue asked for.
func TestDashboardQueriesNameRegisteredMetrics(t *testing.T) {
	// A manager and a controller register what they register at
	// construction; nothing here contacts the (absent) API server.
	mgr, err := mcmanager.New(&rest.Config{Host: "https://127.0.0.1:1"}, nop.New(), mcmanager.Options{
		Metrics: metricsserver.Options{BindAddress: "0"},
	}, mcmanager.WithPerClusterReconcileMetrics(10))
	if err != nil {
		t.Fatal(err)
	}
	err = mcbuilder.ControllerManagedBy(mgr).For(&corev1.ConfigMap{}).
		Complete(mcreconcile.Func(func(context.Context, mcreconcile.Request) (mcreconcile.Result, error) {
			return mcreconcile.Result{}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}

	queries := dashboardQueries(t)
	var named []string
	for _, q := range queries {
		names := metricNames(q)
		if len(names) == 0 {
			t.Errorf("query names no metric: %s", q)
		}
		for _, name := range names {
			if !registered(name) {
				t.Errorf("query names %q, which is not registered: %s", name, q)
			}
			named = append(named, name)
		}
	}
	for _, want := range []string{
		"multicluster_clusters", "multicluster_cluster_transitions_total",
		"multicluster_cluster_probe_duration_seconds_bucket", "multicluster_cluster_healthy",
		"multicluster_dropped_requests_total", "multicluster_reconcile_total", "workqueue_depth",
	} {
		if !slices.Contains(named, want) {
			t.Errorf("no query of the dashboard shows %s", want)
		}
	}
}

// A query naming a metric nobody registers fails the check.
func TestRegisteredRefusesUnknownNames(t *testing.T) {
	if registered("multicluster_no_such_metric_total") {
		t.Fatal("an unknown metric passed as registered")
	}
	if got := metricNames(`sum by (le) (rate(a_b_bucket{job=~"x", c="d"}[5m])) / ignoring(x) b`); !slices.Equal(got, []string{"a_b_bucket", "b"}) {
		t.Fatalf("metricNames = %q", got)
	}
}

// dashboardQueries returns the expr of every panel target and the query of
// every templating variable.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("fleet-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Type       string `json:"type"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			q := strings.TrimSuffix(strings.TrimPrefix(v.Definition, "label_values("), ")")
			q, _, _ = strings.Cut(q, ",")
			out = append(out, q)
		}
	}
	return out
}

var (
	promStrings  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promMatchers = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promIdent    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*\s*\(?`)
	promKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true}
)

// metricNames returns the metric names of a PromQL query: identifiers that
// are neither functions, keywords, label matchers, groupings nor ranges.
func metricNames(q string) []string {
	q = promStrings.ReplaceAllString(q, `""`)
	q = promMatchers.ReplaceAllString(q, " ")
	q = promGrouping.ReplaceAllString(q, " ")
	var out []string
	for _, m := range promIdent.FindAllString(q, -1) {
		if strings.HasSuffix(m, "(") || promKeywords[strings.TrimSpace(m)] {
			continue
		}
		out = append(out, strings.TrimSpace(m))
	}
	return out
}

// registered reports whether controller-runtime's registry holds a metric of
// this name (a histogram's _bucket, _sum and _count series under its own
// name). The registry tells by refusing a probe collector whose description
// has the same name and a different help.
func registered(name string) bool {
	names := []string{name}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			names = append(names, base)
		}
	}
	for _, n := range names {
		probe := prometheus.NewGauge(prometheus.GaugeOpts{Name: n, Help: "probe of the dashboard test"})
		err := metrics.Registry.Register(probe)
		if err == nil {
			metrics.Registry.Unregister(probe)
			continue
		}
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) || are.ExistingCollector != probe {
			return true
		}
	}
	return false
}
