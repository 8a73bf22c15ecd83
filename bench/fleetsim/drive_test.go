package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A side that fails in a round is written as a failure of that round, and
// its other rounds are still compared with the floor of their own round.
func TestAFailedRoundIsReportedAndTheOthersKeepTheirRatios(t *testing.T) {
	fig := func(cpu float64) line {
		return line{units: []string{"ms-cpu/cluster"}, values: map[string]float64{"ms-cpu/cluster": cpu}}
	}
	out := filepath.Join(t.TempDir(), "out.txt")
	d := driveOptions{out: out}
	results := map[string][]line{
		"client-go": {fig(10), fig(20)},
		"library":   {{failed: "exit status 1: fleet_test.go:330: discovery timed out"}, fig(10)},
	}
	if err := d.write(results, []string{"client-go", "library"}, options{members: 3, servers: 1}, 2, false); err != nil {
		t.Fatal(err)
	}
	body, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	text := string(body)
	if !strings.Contains(text, "# BenchmarkFleet/members=3/library-round1 failed: exit status 1: fleet_test.go:330: discovery timed out") {
		t.Errorf("the failed round is not reported:\n%s", text)
	}
	var round2 string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "BenchmarkFleet/members=3/library-round2 ") {
			round2 = l
		}
	}
	if !strings.Contains(round2, "0.5 cpu-ratio") {
		t.Errorf("round 2 is not compared with round 2's floor (10 against 20 ms): %q", round2)
	}
	if !strings.Contains(text, "BenchmarkFleet/members=3/library \t") {
		t.Errorf("no median line for the side's rounds that succeeded:\n%s", text)
	}
}

func TestFailureKeepsTheTestsMessages(t *testing.T) {
	out := "--- FAIL: BenchmarkFleet\n    fleet_test.go:330: cluster \"m00004\": failed to get restmapping\nFAIL\n"
	if got, want := failure(out), `: fleet_test.go:330: cluster "m00004": failed to get restmapping`; got != want {
		t.Errorf("failure = %q, want %q", got, want)
	}
	if got := failure("FAIL\n"); got != "" {
		t.Errorf("failure of an output without messages = %q, want none", got)
	}
}
