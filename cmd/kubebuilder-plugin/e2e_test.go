package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// TestKubebuilderProject scaffolds a project the way a user does, with
// kubebuilder's own CLI (built from its Go module, the tool of this module)
// and this plugin, points it at this checkout, and checks that it builds and
// that its own tests pass on a real fleet; then scaffolds a second kind into
// the same project, as a project grows, and checks that the first kind's
// files, edited by the user meanwhile, are kept and that the project still
// builds and passes its tests.
//
// The scaffolded project downloads nothing but Go modules (through the
// module proxy); its make generate and make manifests build controller-gen
// from its module. Its tests need the control-plane binaries in
// $KUBEBUILDER_ASSETS, which make test provisions.
func TestKubebuilderProject(t *testing.T) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if !hasControlPlane(assets) {
		t.Skip("KUBEBUILDER_ASSETS does not hold kube-apiserver and etcd: run make test, which provisions them (hack/envtest-assets.sh)")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	kubebuilder := filepath.Join(tmp, "bin", "kubebuilder")
	pluginsDir := filepath.Join(tmp, "plugins")
	project := filepath.Join(tmp, "fleet-operator")
	for _, dir := range []string{project, filepath.Join(pluginsDir, PluginName, PluginVersion)} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The project is a module of its own, outside this workspace: it sees
	// this checkout only through the replace directives of --library-dir.
	env := append(os.Environ(), "EXTERNAL_PLUGINS_PATH="+pluginsDir, "GOWORK=off", "KUBEBUILDER_ASSETS="+assets)
	sh := shell{t: t, env: env}

	sh.run(".", "go", "build", "-o", kubebuilder, "sigs.k8s.io/kubebuilder/v4")
	sh.run(".", "go", "build", "-o", filepath.Join(pluginsDir, PluginName, PluginVersion, PluginName), ".")
	plugins := "--plugins=go/v4,multicluster/" + PluginVersion

	ok := t.Run("init", func(t *testing.T) {
		sh := sh.with(t)
		sh.run(project, kubebuilder, "init", plugins, "--domain=example.com", "--repo=example.com/fleet-operator",
			"--"+flagLibraryDir+"="+root)
		expectIn(t, project, mainPath, "mcmanager.New(cfg, provider.Provider", "fleet.bindFlags(flag.CommandLine)", "filters.WithAuthenticationAndAuthorization")
		expectIn(t, project, providersPath, "kubeconfig.New(", "file.New(", "capi.New(", "clusterinventoryapi.New(", "namespace.New(")
		expectIn(t, project, goModPath, LibraryModule+" => "+root)
		sh.run(project, "go", "build", "./...")
	})
	if !ok {
		return
	}

	controller := filepath.Join("internal", "controller", "guestbook_controller.go")
	ok = t.Run("create api", func(t *testing.T) {
		sh := sh.with(t)
		sh.run(project, kubebuilder, "create", "api", plugins, "--group=fleet", "--version=v1", "--kind=Guestbook", "--resource", "--controller")
		expectIn(t, project, controller, "req mcreconcile.Request", "r.Manager.GetCluster(ctx, req.ClusterName)", "mcbuilder.ControllerManagedBy(mgr)")
		expectIn(t, project, filepath.Join("internal", "controller", "suite_test.go"), "fleettest.Start(fleetSize", "fleetv1.AddToScheme(scheme.Scheme)")
		expectIn(t, project, mainPath, "(&controller.GuestbookReconciler{\n\t\tManager: mgr,\n\t}).SetupWithManager(mgr)")
		sh.run(project, "make", "manifests")
		sh.run(project, "go", "build", "./...")
		sh.run(project, "go", "vet", "./...")
	})
	if !ok {
		return
	}

	ok = t.Run("create api again", func(t *testing.T) {
		sh := sh.with(t)
		// The user changes the first controller before the next kind.
		const edit = "\n// The user's own line, kept by later scaffolds.\n"
		path := filepath.Join(project, controller)
		before, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(before, edit...), 0o644); err != nil {
			t.Fatal(err)
		}
		sh.run(project, kubebuilder, "create", "api", plugins, "--group=fleet", "--version=v1", "--kind=Frigate", "--resource", "--controller")
		expectIn(t, project, controller, edit)
		expectIn(t, project, filepath.Join("internal", "controller", "frigate_controller.go"), "func (r *FrigateReconciler) Reconcile(ctx context.Context, req mcreconcile.Request)")
		expectIn(t, project, mainPath, "(&controller.GuestbookReconciler{\n\t\tManager: mgr,\n\t})", "(&controller.FrigateReconciler{\n\t\tManager: mgr,\n\t})")
		// A webhook, served by the host's manager; go/v4's webhook test runs with the others.
		sh.run(project, kubebuilder, "create", "webhook", plugins, "--group=fleet", "--version=v1", "--kind=Guestbook", "--defaulting")
		expectIn(t, project, mainPath, "SetupGuestbookWebhookWithManager(mgr.GetLocalManager())")
		sh.run(project, "make", "manifests")
		// Every package, keeping the manager's binary (bin/cmd, after its package).
		sh.run(project, "go", "build", "-o", filepath.Join(tmp, "bin")+string(filepath.Separator), "./...")

		// The manager's flags: --provider chooses the provider.
		manager := filepath.Join(tmp, "bin", "cmd")
		kubeconfig := filepath.Join(tmp, "kubeconfig")
		if err := os.WriteFile(kubeconfig, []byte(unreachableKubeconfig), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := sh.output(project, manager, "--kubeconfig="+kubeconfig, "--provider=carrier-pigeon")
		if err == nil || !strings.Contains(out, "unknown provider") {
			t.Errorf("the manager with --provider=carrier-pigeon: err %v, output:\n%s", err, out)
		}

		// The project's own tests, of both kinds, on a fleet of control planes
		// (three specs a kind), and go/v4's of the webhook.
		start := time.Now()
		out, err = sh.output(project, "go", "test", "-count=1", "-v", "./...")
		if err != nil {
			t.Fatalf("go test ./...: %v\n%s", err, out)
		}
		if !strings.Contains(out, "Ran 6 of 6 Specs") {
			t.Errorf("go test ./... did not run the 6 specs of the two kinds:\n%s", out)
		}
		t.Logf("go test -count=1 -v ./... (%s)", time.Since(start).Round(time.Second))
	})

	if !ok {
		return
	}

	t.Run("manifests", func(t *testing.T) {
		// config/default as kustomize renders it for kubectl apply -k: the
		// provider's Role from the markers of cmd/providers.go, bound to the
		// manager's service account.
		k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
		resources, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(project, "config", "default"))
		if err != nil {
			t.Fatalf("kustomize build config/default: %v", err)
		}
		const ns, role, sa = "fleet-operator-system", "fleet-operator-manager-role", "fleet-operator-controller-manager"
		found := map[string]string{}
		for _, r := range resources.Resources() {
			if r.GetNamespace() != ns || (r.GetKind() != "Role" && r.GetKind() != "RoleBinding") {
				continue
			}
			y, err := r.AsYAML()
			if err != nil {
				t.Fatal(err)
			}
			found[r.GetKind()+" "+r.GetName()] = string(y)
		}
		if y := found["Role "+role]; !strings.Contains(y, "- secrets") {
			t.Errorf("no Role %s/%s granting the kubeconfig provider its Secrets: %q", ns, role, y)
		}
		y := found["RoleBinding fleet-operator-manager-provider-rolebinding"]
		for _, want := range []string{"kind: Role\n  name: " + role, "kind: ServiceAccount\n  name: " + sa + "\n  namespace: " + ns} {
			if !strings.Contains(y, want) {
				t.Errorf("the provider's RoleBinding does not hold %q:\n%s", want, y)
			}
		}
	})
}

// unreachableKubeconfig lets the manager read a config without reaching a
// server (it fails on the provider flag before it talks to one).
const unreachableKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: nowhere
  cluster:
    server: https://127.0.0.1:1
contexts:
- name: nowhere
  context:
    cluster: nowhere
    user: nobody
users:
- name: nobody
  user:
    token: not-a-token
current-context: nowhere
`

func hasControlPlane(dir string) bool {
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if dir == "" {
			return false
		}
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			return false
		}
	}
	return true
}

// expectIn fails the test unless the project's file holds every want.
func expectIn(t *testing.T, project, file string, want ...string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(project, file))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		if !strings.Contains(string(b), w) {
			t.Errorf("%s does not contain %q:\n%s", file, w, b)
		}
	}
}

// shell runs commands for a test, each bounded by the test's deadline.
type shell struct {
	t   *testing.T
	env []string
}

func (s shell) with(t *testing.T) shell { return shell{t: t, env: s.env} }

// run runs a command in dir and fails the test, with its output, if it fails.
func (s shell) run(dir, name string, args ...string) {
	s.t.Helper()
	start := time.Now()
	out, err := s.output(dir, name, args...)
	if err != nil {
		s.t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	s.t.Logf("%s %s (%s)", filepath.Base(name), strings.Join(args, " "), time.Since(start).Round(time.Second))
}

// output runs a command in dir and returns its combined output.
func (s shell) output(dir, name string, args ...string) (string, error) {
	ctx := s.t.Context()
	if d, ok := s.t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-30*time.Second))
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = s.env
	cmd.Stdin = strings.NewReader("") // kubebuilder asks nothing with --resource and --controller set
	out, err := cmd.CombinedOutput()
	return string(out), err
}
