package rules

import (
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

const (
	alertsFile = "../alerts.yaml"
	repoRoot   = "../../.."
	runbooks   = "docs/advanced/alerts.md"
	// runbookBase is where every runbook_url points.
	runbookBase = "https://github.com/mcruntime/multicluster-runtime/blob/main/" + runbooks
)

// wantAlerts are the alerts the rules must have (issue 43, part 4).
var wantAlerts = []string{
	"MulticlusterClusterDisconnected", "MulticlusterClusterFlapping", "MulticlusterRequestsDropped",
	"MulticlusterEngagementFailures", "MulticlusterWatchSilent", "MulticlusterCredentialsExpiringSoon",
	"MulticlusterShardWithoutOwner",
}

// Every rule of the PrometheusRule loads as Prometheus loads a rules file
// (rulefmt: strict fields, valid PromQL, valid templates); every expression
// names only metrics the library exports; every alert has a severity, a
// summary, a description and a runbook_url whose section exists.
func TestAlertsParseAndLinkToTheirRunbooks(t *testing.T) {
	groups := loadRules(t)
	exported := exportedMetrics(t)
	anchors := headingAnchors(t, filepath.Join(repoRoot, runbooks))
	p := parser.NewParser(parser.Options{})
	var alerts []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %s: a rule that is not an alert (record %q)", g.Name, r.Record)
				continue
			}
			alerts = append(alerts, r.Alert)
			expr, err := p.ParseExpr(r.Expr)
			if err != nil {
				t.Errorf("%s: %v", r.Alert, err)
				continue
			}
			names := selectedMetrics(expr)
			if len(names) == 0 {
				t.Errorf("%s: the expression names no metric: %s", r.Alert, r.Expr)
			}
			for _, name := range names {
				if !exportedName(exported, name) {
					t.Errorf("%s: the expression names %s, which the library does not export: %s", r.Alert, name, r.Expr)
				}
			}
			if r.Labels["severity"] == "" {
				t.Errorf("%s: no severity label", r.Alert)
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if r.Annotations[a] == "" {
					t.Errorf("%s: no %s annotation", r.Alert, a)
				}
			}
			if err := checkRunbook(r.Annotations["runbook_url"], r.Alert, anchors); err != nil {
				t.Errorf("%s: %v", r.Alert, err)
			}
		}
	}
	for _, want := range wantAlerts {
		if !slices.Contains(alerts, want) {
			t.Errorf("no alert %s in %s", want, alertsFile)
		}
	}
}

// The checks can fail: an unknown metric, a runbook section that does not
// exist, and an expression that does not parse are each caught.
func TestTheChecksRefuseWhatIsWrong(t *testing.T) {
	exported := exportedMetrics(t)
	if exportedName(exported, "multicluster_no_such_metric_total") {
		t.Error("an unknown metric passed as exported")
	}
	if !exportedName(exported, "multicluster_cluster_probe_duration_seconds_bucket") {
		t.Error("a histogram's bucket series is not taken as exported")
	}
	anchors := headingAnchors(t, filepath.Join(repoRoot, runbooks))
	if checkRunbook(runbookBase+"#no-such-section", "NoSuchAlert", anchors) == nil {
		t.Error("a runbook_url to a missing section passed")
	}
	p := parser.NewParser(parser.Options{})
	if _, err := p.ParseExpr("rate(multicluster_clusters[5m]"); err == nil {
		t.Error("an expression that does not parse passed")
	}
	_, errs := rulefmt.Parse([]byte("groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up\n    annotations:\n      summary: '{{ .Broken'\n"),
		false, model.UTF8Validation, p, slog.New(slog.DiscardHandler))
	if len(errs) == 0 {
		t.Error("a rule with a broken template passed")
	}
}

// loadRules reads the PrometheusRule and parses its spec as a rules file.
func loadRules(t *testing.T) *rulefmt.RuleGroups {
	t.Helper()
	data, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var obj struct {
		APIVersion string    `yaml:"apiVersion"`
		Kind       string    `yaml:"kind"`
		Spec       yaml.Node `yaml:"spec"`
	}
	if err := yaml.Unmarshal(data, &obj); err != nil {
		t.Fatal(err)
	}
	if obj.APIVersion != "monitoring.coreos.com/v1" || obj.Kind != "PrometheusRule" {
		t.Fatalf("%s holds a %s %s, want a monitoring.coreos.com/v1 PrometheusRule", alertsFile, obj.APIVersion, obj.Kind)
	}
	spec, err := yaml.Marshal(&obj.Spec)
	if err != nil {
		t.Fatal(err)
	}
	groups, errs := rulefmt.Parse(spec, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Error(err)
	}
	if groups == nil || len(groups.Groups) == 0 {
		t.Fatalf("%s: no rule group", alertsFile)
	}
	return groups
}

// selectedMetrics returns the metric names of every vector and matrix
// selector of expr.
func selectedMetrics(expr parser.Expr) []string {
	var out []string
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			out = append(out, vs.Name)
		}
		return nil
	})
	return out
}

// metricLiteral is how the library's code names a metric it exports.
var metricLiteral = regexp.MustCompile(`"(multicluster_[a-z0-9_]+)"`)

// exportedMetrics gathers the names of the metrics the library exports from
// its code: the string literals that name them in non-test Go files (every
// metric of the library is declared with its full name, see
// internal/metrics), less the pending ones the code does have by now.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && path != repoRoot) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range metricLiteral.FindAllSubmatch(data, -1) {
			out[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 10 || !out["multicluster_clusters"] {
		t.Fatalf("found %d metric names in the library's code, not the library's metrics: %v", len(out), out)
	}
	return out
}

// exportedName reports whether name is an exported metric's, or a series of
// an exported histogram's.
func exportedName(exported map[string]bool, name string) bool {
	if exported[name] {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && exported[base] {
			return true
		}
	}
	return false
}

// checkRunbook checks that raw points at a section of the runbooks page
// that exists, named after the alert.
func checkRunbook(raw, alert string, anchors map[string]bool) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	page := *u
	page.Fragment = ""
	if page.String() != runbookBase {
		return fmt.Errorf("runbook_url %s is not a section of %s", raw, runbookBase)
	}
	if u.Fragment != strings.ToLower(alert) {
		return fmt.Errorf("runbook_url %s: its section is not named after the alert (#%s)", raw, strings.ToLower(alert))
	}
	if !anchors[u.Fragment] {
		return fmt.Errorf("runbook_url %s: %s has no section #%s", raw, runbooks, u.Fragment)
	}
	return nil
}

var (
	heading = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	nonSlug = regexp.MustCompile(`[^\p{L}\p{N}\s_-]`)
)

// headingAnchors returns the fragments a Markdown renderer gives the
// headings of the page (as hack/docsnippets computes them for the book's
// links).
func headingAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	fenced := false
	for line := range strings.SplitSeq(string(data), "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		m := heading.FindStringSubmatch(line)
		if fenced || m == nil {
			continue
		}
		title := strings.NewReplacer("`", "", "*", "").Replace(m[1])
		out[strings.ReplaceAll(nonSlug.ReplaceAllString(strings.ToLower(title), ""), " ", "-")] = true
	}
	return out
}
