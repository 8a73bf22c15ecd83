package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// kustomization is the subset of kustomize's kustomization.yaml that the
// manifests under config/ use. Reading it strictly makes any other field an
// error, so a manifest the tests did not read can never pass as tested.
type kustomization struct {
	Namespace string   `json:"namespace,omitempty"`
	Resources []string `json:"resources"`
	Images    []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
	} `json:"images,omitempty"`
}

// clusterScoped lists the cluster-scoped kinds config/ uses; kustomize's
// namespace transformer leaves them alone.
var clusterScoped = map[string]bool{"Namespace": true, "ClusterRole": true, "ClusterRoleBinding": true}

// loadKustomization reads the objects of the kustomization in dir as
// kustomize would build them: resources (files and directories) in order,
// then the namespace and image transforms.
func loadKustomization(dir string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		return nil, fmt.Errorf("%s/kustomization.yaml: %w", dir, err)
	}
	var objs []*unstructured.Unstructured
	for _, r := range k.Resources {
		path := filepath.Join(dir, r)
		fi, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("%s/kustomization.yaml: resource %q: %w", dir, r, err)
		}
		var more []*unstructured.Unstructured
		if fi.IsDir() {
			more, err = loadKustomization(path)
		} else {
			more, err = loadManifests(path)
		}
		if err != nil {
			return nil, err
		}
		objs = append(objs, more...)
	}
	for _, o := range objs {
		if k.Namespace != "" && !clusterScoped[o.GetKind()] {
			o.SetNamespace(k.Namespace)
		}
		if k.Namespace != "" && strings.HasSuffix(o.GetKind(), "RoleBinding") {
			subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
			for _, s := range subjects {
				if s := s.(map[string]any); s["kind"] == "ServiceAccount" {
					s["namespace"] = k.Namespace
				}
			}
			_ = unstructured.SetNestedSlice(o.Object, subjects, "subjects")
		}
		if o.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			c := c.(map[string]any)
			for _, img := range k.Images {
				name, tag, _ := strings.Cut(c["image"].(string), ":")
				if name != img.Name {
					continue
				}
				if img.NewName != "" {
					name = img.NewName
				}
				if img.NewTag != "" {
					tag = img.NewTag
				}
				c["image"] = name + ":" + tag
			}
		}
		_ = unstructured.SetNestedSlice(o.Object, containers, "spec", "template", "spec", "containers")
	}
	return objs, nil
}

// loadManifests reads the YAML documents of a file.
func loadManifests(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for i, doc := range bytes.Split(data, []byte("\n---\n")) {
		o := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &o.Object); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, i+1, err)
		}
		if len(o.Object) == 0 {
			continue
		}
		if o.GetKind() == "" || o.GetName() == "" {
			return nil, fmt.Errorf("%s: document %d has no kind or name", path, i+1)
		}
		objs = append(objs, o)
	}
	return objs, nil
}

// Every kustomization under config/ reads, and a real API server accepts its
// objects (server-side dry run): the RBAC of the providers the deploy tests
// do not run is at least valid.
func TestEveryKustomizationApplies(t *testing.T) {
	host := newClient(t, fleet.Config(0))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fleet-system"}}
	if err := host.Create(t.Context(), ns); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	n := 0
	err := filepath.WalkDir("../../config", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.Name() != "kustomization.yaml" {
			return err
		}
		n++
		objs, err := loadKustomization(filepath.Dir(path))
		if err != nil {
			return err
		}
		for _, o := range objs {
			if strings.HasPrefix(o.GetAPIVersion(), "monitoring.coreos.com/") {
				// The Prometheus operator's kinds, whose CRDs this API server
				// lacks: TestServiceMonitorScrapesTheMetricsService reads the
				// ServiceMonitor, config/prometheus/rules the alerting rules.
				continue
			}
			if err := host.Create(t.Context(), o, client.DryRunAll); client.IgnoreAlreadyExists(err) != nil {
				return fmt.Errorf("%s: %s %s: %w", path, o.GetKind(), o.GetName(), err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 10 {
		t.Fatalf("read %d kustomizations under config/, want every one (10 or more)", n)
	}
}
