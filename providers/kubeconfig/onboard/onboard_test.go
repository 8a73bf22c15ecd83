package onboard_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/mcruntime/multicluster-runtime/providers/kubeconfig/onboard"
)

func TestClusterRefusesBadOptionsBeforeCreatingAnything(t *testing.T) {
	ctx := context.Background()
	for name, opts := range map[string]onboard.Options{
		"negative expiration": {ClusterName: "x", TokenExpiration: -time.Hour},
		"http server":         {ClusterName: "x", Server: "http://10.0.0.1:6443"},
		"not a url":           {ClusterName: "x", Server: "10.0.0.1:6443"},
		"server credentials":  {ClusterName: "x", Server: "https://admin:pl4nted@10.0.0.1:6443"},
		"bad cluster name":    {ClusterName: "Bad_Name\n"},
	} {
		// A member that does not exist: validation must fail before any call.
		unreachable := &rest.Config{Host: "https://127.0.0.1:1"}
		_, err := onboard.Cluster(ctx, unreachable, nil, opts)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if strings.Contains(err.Error(), "127.0.0.1:1") || strings.Contains(err.Error(), "pl4nted") {
			t.Errorf("%s: failed later than validation, or leaked: %v", name, err)
		}
	}
}
