package metrics

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// The disengagement reasons the metric's help names are the ones the book's
// metrics table names: the help once listed a "start-failed" reason that no
// code emits (a cluster that fails to start is disconnected and counted as
// "unhealthy").
func TestDisengagementReasonsMatchTheBook(t *testing.T) {
	desc := make(chan *prometheus.Desc, 1)
	Disengagements.Describe(desc)
	help := regexp.MustCompile(`help: "([^"]*)"`).FindStringSubmatch((<-desc).String())
	if help == nil {
		t.Fatal("no help in the metric's description")
	}
	_, list, _ := strings.Cut(help[1], "by reason (")
	list, _, _ = strings.Cut(list, ")")
	fromHelp := strings.Split(list, ", ")

	data, err := os.ReadFile("../../docs/advanced/metrics-and-readiness.md")
	if err != nil {
		t.Fatal(err)
	}
	var row string
	for line := range strings.SplitSeq(string(data), "\n") {
		if strings.HasPrefix(line, "| `multicluster_cluster_disengagements_total`") {
			row = line
		}
	}
	_, ended, ok := strings.Cut(row, "engagements that ended: ")
	if !ok {
		t.Fatalf("the book's metrics table has no disengagement reasons: %q", row)
	}
	ended, _, _ = strings.Cut(ended, ".")
	var fromBook []string
	for _, m := range regexp.MustCompile("`([a-z-]+)`").FindAllStringSubmatch(ended, -1) {
		fromBook = append(fromBook, m[1])
	}
	slices.Sort(fromHelp)
	slices.Sort(fromBook)
	if !slices.Equal(fromHelp, fromBook) {
		t.Fatalf("disengagement reasons differ:\n  help: %v\n  book: %v", fromHelp, fromBook)
	}
}
