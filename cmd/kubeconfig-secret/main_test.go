package main

import (
	"os"
	"strings"
	"testing"
)

func TestParseRules(t *testing.T) {
	for file, want := range map[string]int{"testdata/rules.yaml": 2, "testdata/rules-list.yaml": 1} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		rules, err := parseRules(data)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(rules) != want || rules[0].Resources[0] != "configmaps" || rules[0].Verbs[2] != "watch" {
			t.Fatalf("%s: got %+v", file, rules)
		}
	}
	if _, err := parseRules([]byte("kind: ClusterRole\n")); err == nil {
		t.Fatal("a file without rules was accepted")
	}
}

func TestNameIsRequired(t *testing.T) {
	err := run([]string{"-rules", "testdata/rules.yaml"})
	if err == nil || !strings.Contains(err.Error(), "-name") {
		t.Fatalf("run without -name: %v", err)
	}
}
