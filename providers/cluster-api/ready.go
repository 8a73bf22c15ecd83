package capi

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	//lint:ignore SA1019 v1beta1 is deprecated upstream, and supported here for installations that serve nothing newer.
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultIsReady reports whether a Cluster's control plane is initialised,
// per the contract of its API version: for v1beta2,
// status.initialization.controlPlaneInitialized; for v1beta1, the
// ControlPlaneInitialized condition or status.controlPlaneReady. An API server
// answers from then on, which is what engaging needs; workers may still be
// joining. Any other type is never ready.
func DefaultIsReady(obj client.Object) bool {
	switch c := obj.(type) {
	case *clusterv1.Cluster:
		return ptr.Deref(c.Status.Initialization.ControlPlaneInitialized, false)
	case *clusterv1beta1.Cluster:
		if c.Status.ControlPlaneReady {
			return true
		}
		for _, cond := range c.Status.Conditions {
			if cond.Type == clusterv1beta1.ControlPlaneInitializedCondition {
				return cond.Status == corev1.ConditionTrue
			}
		}
	}
	return false
}
