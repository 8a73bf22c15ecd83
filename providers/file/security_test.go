package file_test

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	"github.com/mcruntime/multicluster-runtime/providers/file"
)

// skipped reads multicluster_file_provider_skipped_total{reason}.
func skipped(t *testing.T, reason string) float64 {
	v, _ := fleettest.Metric(t, "multicluster_file_provider_skipped_total", map[string]string{"reason": reason})
	return v
}

// waitForLog waits until the captured logs contain every substring.
func waitForLog(t *testing.T, logs *fleettest.LogBuffer, subs ...string) {
	t.Helper()
	fleettest.Eventually(t, time.Minute, func() error {
		all := logs.String()
		for _, s := range subs {
			if !strings.Contains(all, s) {
				return fmt.Errorf("no log line contains %q", s)
			}
		}
		return nil
	})
}

// Two sources that map to the same cluster name are an error naming both;
// neither wins.
func TestNameCollisionIsAnErrorNamingBoth(t *testing.T) {
	dir := t.TempDir()
	// "<dir>/a" + "+" + "b.yaml+c" and "<dir>/a+b.yaml" + "+" + "c".
	first := filepath.Join(dir, "a")
	second := filepath.Join(dir, "a+b.yaml")
	good := filepath.Join(dir, "good.yaml")
	writeAtomically(t, first, kubeconfig(t, map[string]int{"b.yaml+c": 1}))
	writeAtomically(t, second, kubeconfig(t, map[string]int{"c": 2}))
	writeAtomically(t, good, kubeconfig(t, map[string]int{"ok": 0}))

	conflicts := skipped(t, "name-conflict")
	logs := &fleettest.LogBuffer{}
	p, err := file.New(file.Options{KubeconfigFiles: []string{first, second, good}})
	if err != nil {
		t.Fatal(err)
	}
	tr := run(t, p, logs.Logger())
	fleettest.ExpectEngaged(t, tr, map[multicluster.ClusterName]int{good + "+ok": 0})
	// The error is quoted in the log line: its quotes are escaped.
	waitForLog(t, logs, first+`\" context \"b.yaml+c`, second+`\" context \"c`, "several kubeconfig contexts")
	if skipped(t, "name-conflict") <= conflicts {
		t.Error("the name conflict was not counted")
	}

	// Once one source is gone, the name is no longer ambiguous.
	if err := os.Remove(first); err != nil {
		t.Fatal(err)
	}
	fleettest.ExpectEngaged(t, tr, map[multicluster.ClusterName]int{good + "+ok": 0, second + "+c": 2})

	// Two contexts of one file that a ClusterName function maps to one name.
	both := filepath.Join(dir, "both.yaml")
	writeAtomically(t, both, kubeconfig(t, map[string]int{"east": 0, "west": 1}))
	logs2 := &fleettest.LogBuffer{}
	p2, err := file.New(file.Options{
		KubeconfigFiles: []string{both, good},
		ClusterName: func(path, context string) string {
			if path == both {
				return "same"
			}
			return context
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	fleettest.ExpectEngaged(t, run(t, p2, logs2.Logger()), map[multicluster.ClusterName]int{"ok": 0})
	waitForLog(t, logs2, `context \"east\"`, `context \"west\"`, "several kubeconfig contexts")
}

// Files that are too large, or not regular files, are skipped with a log
// line; a FIFO listed by path neither blocks the provider nor its shutdown.
func TestLargeAndSpecialFilesAreSkipped(t *testing.T) {
	dir := t.TempDir()
	large := filepath.Join(dir, "large.yaml")
	padding := "# " + strings.Repeat("x", 1<<20) + "\n"
	writeAtomically(t, large, append([]byte(padding), kubeconfig(t, map[string]int{"large": 1})...))
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.yaml")
	writeAtomically(t, good, kubeconfig(t, map[string]int{"ok": 0}))

	tooLarge, notRegular := skipped(t, "too-large"), skipped(t, "not-regular")
	logs := &fleettest.LogBuffer{}
	p, err := file.New(file.Options{KubeconfigFiles: []string{large, fifo, good}})
	if err != nil {
		t.Fatal(err)
	}
	tr := run(t, p, logs.Logger())
	fleettest.ExpectEngaged(t, tr, map[multicluster.ClusterName]int{good + "+ok": 0})
	waitForLog(t, logs, fmt.Sprintf("%q", large), "more than the limit", fmt.Sprintf("%q", fifo), "not a regular file")
	if skipped(t, "too-large") <= tooLarge || skipped(t, "not-regular") <= notRegular {
		t.Error("the skipped files were not counted")
	}

	// A larger limit is an option.
	logs2 := &fleettest.LogBuffer{}
	p2, err := file.New(file.Options{KubeconfigFiles: []string{large}, MaxKubeconfigSize: 2 << 20})
	if err != nil {
		t.Fatal(err)
	}
	fleettest.ExpectEngaged(t, run(t, p2, logs2.Logger()), map[multicluster.ClusterName]int{large + "+large": 1})
}

// Names with control characters are refused, with a log line that does not
// print them raw.
func TestInvalidClusterNamesAreRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "fleet.yaml")
	writeAtomically(t, path, kubeconfig(t, map[string]int{"ok": 0, "forged\nINFO line": 1, "esc\x1b[2J": 2}))

	invalid := skipped(t, "invalid-name")
	logs := &fleettest.LogBuffer{}
	p, err := file.New(file.Options{KubeconfigFiles: []string{path}})
	if err != nil {
		t.Fatal(err)
	}
	fleettest.ExpectEngaged(t, run(t, p, logs.Logger()), map[multicluster.ClusterName]int{path + "+ok": 0})
	waitForLog(t, logs, "invalid cluster name")
	if skipped(t, "invalid-name") <= invalid {
		t.Error("the invalid names were not counted")
	}
	if all := logs.String(); strings.Contains(all, "forged\nINFO") || strings.Contains(all, "\x1b") {
		t.Errorf("a control character reached the logs raw:\n%q", all)
	}
}

// A kubeconfig listed by path on a Secret or ConfigMap volume is updated by
// the kubelet through an atomic swap of the ..data symlink; the provider
// follows it.
func TestKubeletSymlinkSwapIsFollowed(t *testing.T) {
	vol := t.TempDir()
	writeVersion := func(version string, member int) {
		d := filepath.Join(vol, version)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "kubeconfig"), kubeconfig(t, map[string]int{"member": member}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeVersion("..2026_11_23_10_00_00.1", 0)
	if err := os.Symlink("..2026_11_23_10_00_00.1", filepath.Join(vol, "..data")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(vol, "kubeconfig")
	if err := os.Symlink(filepath.Join("..data", "kubeconfig"), path); err != nil {
		t.Fatal(err)
	}

	p, err := file.New(file.Options{KubeconfigFiles: []string{path}})
	if err != nil {
		t.Fatal(err)
	}
	tr := run(t, p, (&fleettest.LogBuffer{}).Logger())
	name := path + "+member"
	fleettest.ExpectEngaged(t, tr, map[multicluster.ClusterName]int{name: 0})

	// The kubelet's update: new timestamped directory, ..data_tmp pointing
	// at it, renamed over ..data, old directory removed.
	writeVersion("..2026_11_23_10_05_00.2", 1)
	if err := os.Symlink("..2026_11_23_10_05_00.2", filepath.Join(vol, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(vol, "..data_tmp"), filepath.Join(vol, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(vol, "..2026_11_23_10_00_00.1")); err != nil {
		t.Fatal(err)
	}
	fleettest.ExpectEngaged(t, tr, map[multicluster.ClusterName]int{name: 1})
}

// Credentials planted in every field of kubeconfig files reach no log line,
// whichever way the files fail.
func TestNoCredentialReachesTheLogs(t *testing.T) {
	planted := map[string]string{
		"url-password": "pl4nted-url-password",
		"url-query":    "pl4nted-query-token",
		"token":        "pl4nted-bearer-token",
		"password":     "pl4nted-basic-password",
		"exec-arg":     "pl4nted-exec-argument",
		"exec-env":     "pl4nted-exec-env-value",
		"cert-data":    "pl4ntedcertdata",
		"key-data":     "pl4ntedkeydata",
		"auth-config":  "pl4nted-auth-provider-secret",
		"proxy":        "pl4nted-proxy-password",
		"exec-version": "pl4nted-exec-apiversion",
	}
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	server := fmt.Sprintf("https://admin:%s@127.0.0.1:1/?token=%s", planted["url-password"], planted["url-query"])
	kc := func(user string) []byte {
		return []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, proxy-url: "http://proxyuser:%s@127.0.0.1:1"}}]
users: [{name: u, user: %s}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`, server, planted["proxy"], user))
	}
	dir := t.TempDir()
	files := map[string][]byte{
		"token.yaml":     kc(fmt.Sprintf("{token: %s}", planted["token"])),
		"basic.yaml":     kc(fmt.Sprintf("{username: admin, password: %s}", planted["password"])),
		"certs.yaml":     kc(fmt.Sprintf("{client-certificate-data: %s, client-key-data: %s}", b64(planted["cert-data"]), b64(planted["key-data"]))),
		"exec.yaml":      kc(fmt.Sprintf("{exec: {apiVersion: client.authentication.k8s.io/v1, command: /nonexistent/plugin, args: [--token=%s], env: [{name: TOKEN, value: %s}]}}", planted["exec-arg"], planted["exec-env"])),
		"provider.yaml":  kc(fmt.Sprintf("{auth-provider: {name: oidc, config: {client-secret: %s}}}", planted["auth-config"])),
		"malformed.yaml": kc(fmt.Sprintf("{token: [%s]}", planted["token"])),
		"version.yaml":   kc(fmt.Sprintf("{exec: {apiVersion: %s, command: /nonexistent/plugin, interactiveMode: Never}}", planted["exec-version"])),
	}
	for name, data := range files {
		writeAtomically(t, filepath.Join(dir, name), data)
	}
	logs := &fleettest.LogBuffer{}
	p, err := file.New(file.Options{KubeconfigDirs: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	run(t, p, logs.Logger())
	// Every file has failed at least once (engage retries, or parse errors).
	subs := make([]string, 0, len(files))
	for name := range files {
		subs = append(subs, filepath.Join(dir, name))
	}
	waitForLog(t, logs, subs...)
	all := logs.String()
	for field, secret := range planted {
		if strings.Contains(all, secret) || strings.Contains(all, b64(secret)) {
			t.Errorf("the %s credential reached the logs", field)
		}
	}
	if t.Failed() || os.Getenv("SHOW_LOGS") != "" {
		t.Logf("logs:\n%s", all)
	}
}

// Files are trusted: an exec plugin runs, and a relative command path is
// resolved against the kubeconfig's directory, as kubectl does.
func TestRelativeExecCommandIsResolvedAgainstTheFile(t *testing.T) {
	dir := t.TempDir()
	cfg := fleet.Config(1)
	cred := fmt.Sprintf(`{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"clientCertificateData":%q,"clientKeyData":%q}}`,
		string(cfg.CertData), string(cfg.KeyData))
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "cred.json"), []byte(cred), 0o600); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\ncat \"$(dirname \"$0\")/cred.json\"\n"
	if err := os.WriteFile(filepath.Join(dir, "bin", "plugin.sh"), []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "exec.yaml")
	writeAtomically(t, path, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, certificate-authority-data: %s}}]
users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: ./bin/plugin.sh, interactiveMode: Never}}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`, cfg.Host, base64.StdEncoding.EncodeToString(cfg.CAData))))

	p, err := file.New(file.Options{KubeconfigFiles: []string{path}})
	if err != nil {
		t.Fatal(err)
	}
	// The test's working directory is the package's, not dir.
	fleettest.ExpectEngaged(t, run(t, p, (&fleettest.LogBuffer{}).Logger()), map[multicluster.ClusterName]int{path + "+x": 1})
}
