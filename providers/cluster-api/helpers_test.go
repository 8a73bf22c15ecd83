package capi_test

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
)

// fleet holds the control planes shared by the package's tests. Control
// plane 0 is the host of a current Cluster API (CRD serving v1beta1 and
// v1beta2, v1beta2 stored); control plane 2 the host of an older one (only
// v1beta1); each test's members are the other control planes.
var fleet *fleettest.Fleet

func TestMain(m *testing.M) {
	logf.SetLogger(logr.Discard()) // each test logs through its manager's logger
	fleettest.RunMainWithOptions(m, 3, fleettest.Options{StartTimeout: 3 * time.Minute}, func(f *fleettest.Fleet) error {
		fleet = f
		if err := installCRDs(); err != nil {
			return fmt.Errorf("installing the Cluster API CRDs: %w", err)
		}
		return nil
	})
}

// kubeconfig returns a kubeconfig for control plane i, for a new user of
// its own: two calls give different credentials for the same server.
func kubeconfig(t *testing.T, i int, user string) string { return fleet.UserKubeconfig(t, i, user) }

// identity is a control plane and the kubeconfig used for it.
type identity = fleettest.Credentials

// expectEngaged waits until exactly the clusters of want are engaged, each
// reaching the given control plane as the given user.
func expectEngaged(t *testing.T, tr *fleettest.Tracker, want map[string]identity) map[string]cluster.Cluster {
	t.Helper()
	return fleet.ExpectEngagedWith(t, tr, want)
}

// crdFile is the Cluster CRD of sigs.k8s.io/cluster-api v1.14.2, copied from
// core/config/crd/bases/cluster.x-k8s.io_clusters.yaml in the Go module cache
// (see testdata/README).
const crdFile = "testdata/cluster.x-k8s.io_clusters.yaml"

// installCRDs installs the Cluster CRD on control plane 0 as it is, and on
// control plane 2 with v1beta1 alone, as older Cluster API releases did.
func installCRDs() error {
	data, err := os.ReadFile(crdFile)
	if err != nil {
		return err
	}
	current := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, current); err != nil {
		return fmt.Errorf("%s: %w", crdFile, err)
	}
	older := current.DeepCopy()
	older.Spec.Versions = slices.DeleteFunc(older.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool {
		return v.Name != "v1beta1"
	})
	if len(older.Spec.Versions) != 1 {
		return fmt.Errorf("%s: no v1beta1 version", crdFile)
	}
	older.Spec.Versions[0].Storage = true
	for i, crd := range map[int]*apiextensionsv1.CustomResourceDefinition{0: current, 2: older} {
		if _, err := envtest.InstallCRDs(fleet.Config(i), envtest.CRDInstallOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{crd}}); err != nil {
			return fmt.Errorf("control plane %d: %w", i, err)
		}
	}
	return nil
}
