// Package v1alpha1 holds the Go types of the ClusterProfile API
// (multicluster.x-k8s.io/v1alpha1) defined by SIG-Multicluster's KEP-4322,
// with the access providers of KEP-5339 and the well-known properties of
// KEP-2149.
//
// These are the project's own types, written against the KEP: the upstream Go
// module is not a dependency. The CRD generated from them lives in
// providers/cluster-inventory-api/config/crd; `make generate` regenerates it
// and the deepcopy functions with a pinned controller-gen.
//
// +kubebuilder:object:generate=true
// +groupName=multicluster.x-k8s.io
package v1alpha1
