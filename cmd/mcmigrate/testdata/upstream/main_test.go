package main

import (
	"testing"

	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
)

func TestDescribe(t *testing.T) {
	if got := describe(multicluster.ClusterName("east")); got != "east (host: false)" {
		t.Errorf("describe: %q", got)
	}
	if multicluster.ClusterName("").String() != "" {
		t.Error("the host has a name")
	}
}
