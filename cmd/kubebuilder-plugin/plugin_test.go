package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"sigs.k8s.io/kubebuilder/v4/pkg/plugin/external"
)

// The files of go/v4's init this plugin reads, trimmed to what it looks at.
const (
	goV4Main = `package main

func main() {
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		LeaderElectionID:        "1a2b3c4d.example.com",
	})
	// +kubebuilder:scaffold:builder
}
`
	goV4GoMod = "module example.com/fleet-operator\n\ngo 1.25.0\n\nrequire sigs.k8s.io/controller-runtime v0.25.0\n"
	goV4RBAC  = "resources:\n- service_account.yaml\n- role.yaml\n- role_binding.yaml\n- leader_election_role.yaml\n"
)

func initUniverse() map[string]string {
	return map[string]string{
		mainPath:                            goV4Main,
		goModPath:                           goV4GoMod,
		boilerplatePath:                     "/*\nCopyright 2026.\n*/",
		"config/default/kustomization.yaml": "namespace: fleet-operator-system\nnamePrefix: fleet-operator-\n",
		"config/rbac/role_binding.yaml":     "metadata:\n  labels:\n    app.kubernetes.io/name: fleet-operator\n",
		rbacKustomization:                   goV4RBAC,
	}
}

// roundTrip sends req through serve as kubebuilder does and returns the response.
func roundTrip(t *testing.T, req external.PluginRequest) external.PluginResponse {
	t.Helper()
	in, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := serve(bytes.NewReader(in), &out, nil); err != nil {
		t.Fatal(err)
	}
	var res external.PluginResponse
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("response %q: %v", out.String(), err)
	}
	return res
}

func TestInit(t *testing.T) {
	res := roundTrip(t, external.PluginRequest{
		APIVersion: protocolVersion, Command: "init", Universe: initUniverse(),
		Args: []string{"--domain", "example.com", "--repo", "example.com/fleet-operator", "--" + flagLibraryDir, "/src/mcr", "--" + flagLibraryVersion, "v0.3.0"},
	})
	if res.Error {
		t.Fatalf("init failed: %v", res.ErrorMsgs)
	}
	for file, want := range map[string][]string{
		mainPath: {"Copyright 2026.", ownMarker, `LeaderElectionID:       "1a2b3c4d.example.com"`, "mcmanager.New(cfg, provider.Provider, ctrl.Options{",
			"// +kubebuilder:scaffold:imports", "// +kubebuilder:scaffold:scheme", "// +kubebuilder:scaffold:builder"},
		providersPath: {ownMarker, `ns = "fleet-operator-system"`, "namespace=fleet-operator-system,resources=secrets"},
		goModPath: {"go 1.26.0", LibraryModule + " v0.3.0", ClusterAPIModule + " v0.3.0",
			"replace " + LibraryModule + " => /src/mcr", "replace " + ClusterAPIModule + " => /src/mcr/providers/cluster-api"},
		"config/rbac/" + providerRoleBinding: {"kind: RoleBinding", "namespace: fleet-operator-system", "app.kubernetes.io/name: fleet-operator"},
		rbacKustomization:                    {"- role_binding.yaml\n- " + providerRoleBinding + "\n- leader_election_role.yaml"},
	} {
		got, ok := res.Universe[file]
		if !ok {
			t.Errorf("init wrote no %s", file)
			continue
		}
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("%s does not contain %q:\n%s", file, w, got)
			}
		}
	}
	if _, ok := res.Universe[boilerplatePath]; ok {
		t.Errorf("init returned %s, which it does not change", boilerplatePath)
	}

	// The project is initialised: a second init is refused.
	u := initUniverse()
	u[mainPath] = res.Universe[mainPath]
	again := roundTrip(t, external.PluginRequest{APIVersion: protocolVersion, Command: "init", Universe: u})
	if !again.Error || !strings.Contains(strings.Join(again.ErrorMsgs, " "), "already multi-cluster") {
		t.Errorf("a second init: error %v %q, want a refusal", again.Error, again.ErrorMsgs)
	}
}

func TestInitWithoutGoV4(t *testing.T) {
	res := roundTrip(t, external.PluginRequest{APIVersion: protocolVersion, Command: "init", Universe: map[string]string{}})
	if !res.Error || !strings.Contains(strings.Join(res.ErrorMsgs, " "), "run this plugin after go/v4") {
		t.Errorf("init without go/v4's files: error %v %q", res.Error, res.ErrorMsgs)
	}
}

// goV4Controller is go/v4's controller for fleet/v1 Guestbook, trimmed.
const goV4Controller = `package controller

// +kubebuilder:rbac:groups=fleet.example.com,resources=guestbooks,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=fleet.example.com,resources=guestbooks/status,verbs=get;update;patch

func (r *GuestbookReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return ctrl.Result{}, nil
}
`

func apiRequest(t *testing.T, main string) external.PluginRequest {
	t.Helper()
	initRes := roundTrip(t, external.PluginRequest{APIVersion: protocolVersion, Command: "init", Universe: initUniverse()})
	if initRes.Error {
		t.Fatalf("init failed: %v", initRes.ErrorMsgs)
	}
	if main == "" {
		main = strings.Replace(initRes.Universe[mainPath], "\t// +kubebuilder:scaffold:builder", `	if err := (&controller.GuestbookReconciler{
		Client: mgr.GetClient(),
		Scheme: mgr.GetScheme(),
	}).SetupWithManager(mgr); err != nil {
		setupLog.Error(err, "Failed to create controller", "controller", "guestbook")
		os.Exit(1)
	}
	// +kubebuilder:scaffold:builder`, 1)
	}
	return external.PluginRequest{
		APIVersion: protocolVersion, Command: "create api",
		Args: []string{"--group", "fleet", "--version", "v1", "--kind", "Guestbook", "--resource", "--controller"},
		Universe: map[string]string{
			mainPath:        main,
			boilerplatePath: "/*\nCopyright 2026.\n*/",
			"internal/controller/guestbook_controller.go":      goV4Controller,
			"internal/controller/guestbook_controller_test.go": "package controller\n\n// reconcile.Request{\n",
			"internal/controller/suite_test.go":                "package controller\n\n// envtest\n",
		},
		Config: map[string]any{
			"version": "3", "domain": "example.com", "repo": "example.com/fleet-operator", "projectName": "fleet-operator",
			"layout": []any{"go.kubebuilder.io/v4", PluginName + "/" + PluginVersion},
			"resources": []any{map[string]any{
				"group": "fleet", "version": "v1", "kind": "Guestbook", "domain": "example.com",
				"path": "example.com/fleet-operator/api/v1", "controller": true,
				"api": map[string]any{"crdVersion": "v1", "namespaced": true},
			}},
		},
	}
}

func TestCreateAPI(t *testing.T) {
	res := roundTrip(t, apiRequest(t, ""))
	if res.Error {
		t.Fatalf("create api failed: %v", res.ErrorMsgs)
	}
	for file, want := range map[string][]string{
		"internal/controller/guestbook_controller.go": {"Copyright 2026.", ownMarker, `fleetv1 "example.com/fleet-operator/api/v1"`,
			"func (r *GuestbookReconciler) Reconcile(ctx context.Context, req mcreconcile.Request) (ctrl.Result, error)",
			"r.Manager.GetCluster(ctx, req.ClusterName)", "For(&fleetv1.Guestbook{})", `Named("guestbook")`,
			"// +kubebuilder:rbac:groups=fleet.example.com,resources=guestbooks/status,verbs=get;update;patch"},
		"internal/controller/guestbook_controller_test.go": {ownMarker, "ClusterName: provider.ClusterName(i)", "multicluster.ErrClusterNotFound"},
		"internal/controller/suite_test.go": {ownMarker, "fleettest.Start(fleetSize, opts)", `fleetv1 "example.com/fleet-operator/api/v1"`,
			"err = fleetv1.AddToScheme(scheme.Scheme)", "// +kubebuilder:scaffold:scheme", "// +kubebuilder:scaffold:imports",
			`filepath.FromSlash("../../config/crd/bases")`},
		mainPath: {"(&controller.GuestbookReconciler{\n\t\tManager: mgr,\n\t}).SetupWithManager(mgr)"},
	} {
		got, ok := res.Universe[file]
		if !ok {
			t.Errorf("create api wrote no %s", file)
			continue
		}
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("%s does not contain %q:\n%s", file, w, got)
			}
		}
	}
	if strings.Contains(res.Universe[mainPath], "mgr.GetClient()") {
		t.Errorf("%s still wires the reconciler with the single-cluster client:\n%s", mainPath, res.Universe[mainPath])
	}

	// Run again over its own files (a later create api), it leaves them alone.
	req := apiRequest(t, res.Universe[mainPath])
	for file, content := range res.Universe {
		req.Universe[file] = content + "\n// edited\n"
	}
	again := roundTrip(t, req)
	if again.Error {
		t.Fatalf("create api over its own files failed: %v", again.ErrorMsgs)
	}
	for file := range again.Universe {
		if file != mainPath {
			t.Errorf("create api rewrote %s, which it wrote before", file)
		}
	}
}

func TestCreateAPIRefusesASingleClusterProject(t *testing.T) {
	res := roundTrip(t, apiRequest(t, goV4Main))
	if !res.Error || !strings.Contains(strings.Join(res.ErrorMsgs, " "), "is not multi-cluster") {
		t.Errorf("create api in a project not initialised with the plugin: error %v %q", res.Error, res.ErrorMsgs)
	}
}

func TestCreateWebhook(t *testing.T) {
	main := strings.Replace(apiRequest(t, "").Universe[mainPath], "\t// +kubebuilder:scaffold:builder", `	if err := webhookv1.SetupGuestbookWebhookWithManager(mgr); err != nil {
		os.Exit(1)
	}
	// +kubebuilder:scaffold:builder`, 1)
	res := roundTrip(t, external.PluginRequest{APIVersion: protocolVersion, Command: "create webhook", Universe: map[string]string{mainPath: main}})
	if res.Error {
		t.Fatalf("create webhook failed: %v", res.ErrorMsgs)
	}
	if got := res.Universe[mainPath]; !strings.Contains(got, "webhookv1.SetupGuestbookWebhookWithManager(mgr.GetLocalManager())") {
		t.Errorf("%s does not wire the webhook with the host's manager:\n%s", mainPath, got)
	}
}

func TestFlagsAndMetadata(t *testing.T) {
	res := roundTrip(t, external.PluginRequest{APIVersion: protocolVersion, Command: "flags", Args: []string{"--init"}})
	var names []string
	for _, f := range res.Flags {
		names = append(names, f.Name)
	}
	if got := strings.Join(names, ","); got != flagLibraryVersion+","+flagLibraryDir {
		t.Errorf("init flags %q", got)
	}
	if res := roundTrip(t, external.PluginRequest{APIVersion: protocolVersion, Command: "flags", Args: []string{"--api"}}); len(res.Flags) != 0 {
		t.Errorf("create api flags %v, want none", res.Flags)
	}
	for _, sub := range []string{"init", "api", "webhook"} {
		res := roundTrip(t, external.PluginRequest{APIVersion: protocolVersion, Command: "metadata", Args: []string{"--" + sub}})
		if res.Metadata.Description == "" || res.Metadata.Examples == "" {
			t.Errorf("metadata of %s: %+v", sub, res.Metadata)
		}
	}
}

func TestUnsupportedCommand(t *testing.T) {
	res := roundTrip(t, external.PluginRequest{APIVersion: protocolVersion, Command: "edit"})
	if !res.Error || !strings.Contains(strings.Join(res.ErrorMsgs, " "), `does not support "edit"`) {
		t.Errorf("edit: error %v %q", res.Error, res.ErrorMsgs)
	}
}
