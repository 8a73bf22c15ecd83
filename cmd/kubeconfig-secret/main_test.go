package main

import (
	"fmt"
	"os"
	"path/filepath"
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
	for content, want := range map[string]string{
		"kind: ClusterRole\n":  `no "rules" list`,
		"rules: []\n":          "the rules list is empty",
		"[]\n":                 "the rules list is empty",
		"rules: {verbs: []}\n": `"rules" is not a list of rules`,
		"- 3\n":                "nor a list of rules",
	} {
		_, err := parseRules([]byte(content))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error saying %s", content, err, want)
		}
	}
}

func TestNameIsRequired(t *testing.T) {
	err := run([]string{"-rules", "testdata/rules.yaml"})
	if err == nil || !strings.Contains(err.Error(), "-name") {
		t.Fatalf("run without -name: %v", err)
	}
}

func TestFlagsAreValidatedFirst(t *testing.T) {
	for _, args := range [][]string{
		{"-name", "x", "-expiration", "-1h"},
		{"-name", "x", "-expiration", "0s"},
		{"-name", "x", "-server", "http://10.0.0.1:6443"},
		{"-name", "x", "-server", "10.0.0.1:6443"},
		{"-name", "x", "-server", "https://admin:pl4nted@10.0.0.1:6443"},
		{"-name", "Not_A_Secret_Name"},
	} {
		// No kubeconfig exists here: an error about kubeconfigs means the
		// flags were not checked first.
		t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "missing"))
		err := run(args)
		if err == nil || strings.Contains(err.Error(), "member kubeconfig") || strings.Contains(err.Error(), "host kubeconfig") || strings.Contains(err.Error(), "pl4nted") {
			t.Errorf("%v: %v", args, err)
		}
	}
}

// Credentials planted in every field of the kubeconfigs reach neither the
// error nor the output.
func TestNoCredentialInErrors(t *testing.T) {
	planted := []string{"pl4nted-url-password", "pl4nted-query-token", "pl4nted-bearer-token", "pl4nted-proxy-password"}
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://admin:%s@127.0.0.1:1/?token=%s", proxy-url: "http://u:%s@127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: %s}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`, planted[0], planted[1], planted[3], planted[2])
	malformed := fmt.Sprintf("apiVersion: v1\nkind: Config\nusers: [{name: u, user: {token: [%s]}}]\n", planted[2])
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "member.yaml"), filepath.Join(dir, "malformed.yaml")
	if err := os.WriteFile(good, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(malformed), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"-name", "x", "-member-kubeconfig", good, "-host-kubeconfig", good},
		{"-name", "x", "-member-kubeconfig", bad, "-host-kubeconfig", good},
	} {
		err := run(args)
		if err == nil {
			t.Fatalf("%v: succeeded against an unreachable member", args)
		}
		t.Logf("%v: %v", args, err)
		for _, s := range planted {
			if strings.Contains(err.Error(), s) {
				t.Errorf("%v: the error carries %q: %v", args, s, err)
			}
		}
	}
}
