package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
)

// Condition types of a ClusterProfile (KEP-4322).
const (
	// ConditionControlPlaneHealthy is True while the cluster's control plane
	// is healthy, as seen by the cluster manager.
	ConditionControlPlaneHealthy = "ControlPlaneHealthy"
	// ConditionJoined is True once the cluster has joined the cluster
	// manager's inventory.
	ConditionJoined = "Joined"
)

// Well-known properties (KEP-2149).
const (
	// PropertyClusterID names the property holding the cluster's ID, unique
	// and stable within its ClusterSet.
	PropertyClusterID = "cluster.clusterset.k8s.io"
	// PropertyClusterSet names the property holding the ClusterSet the
	// cluster belongs to.
	PropertyClusterSet = "clusterset.k8s.io"
)

// LabelClusterManager is the label key by which a ClusterProfile names the
// cluster manager that owns it (KEP-4322).
const LabelClusterManager = "x-k8s.io/cluster-manager"

// ClusterProfile represents one cluster of an inventory: its manager, its
// health, its properties and how to reach it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced
// +kubebuilder:printcolumn:name="Manager",type=string,JSONPath=`.spec.clusterManager.name`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterProfile struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is written by whoever registers the cluster.
	// +required
	Spec ClusterProfileSpec `json:"spec"`
	// Status is written by the cluster manager.
	// +optional
	Status ClusterProfileStatus `json:"status,omitempty"`
}

// ClusterProfileSpec is the desired state of a ClusterProfile.
type ClusterProfileSpec struct {
	// DisplayName is a human-readable name of the cluster.
	// +optional
	DisplayName string `json:"displayName,omitempty"`

	// ClusterManager is the manager that owns the cluster. It cannot change.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="ClusterManager is immutable"
	ClusterManager ClusterManager `json:"clusterManager"`
}

// ClusterManager identifies the cluster manager that owns a cluster.
type ClusterManager struct {
	// Name of the cluster manager, e.g. "open-cluster-management".
	// +required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// ClusterProfileStatus is the observed state of a cluster.
type ClusterProfileStatus struct {
	// Conditions, among them ControlPlaneHealthy and Joined.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Version of the components of the cluster.
	// +optional
	Version ClusterVersion `json:"version,omitempty"`

	// Properties of the cluster: the KEP-2149 well-known properties
	// (cluster.clusterset.k8s.io, clusterset.k8s.io) and any others.
	// +optional
	// +listType=map
	// +listMapKey=name
	Properties []Property `json:"properties,omitempty"`

	// AccessProviders list the ways to reach the cluster (KEP-5339): a
	// controller picks the first of its configured access providers present
	// here and runs that provider's credential plugin against Cluster.
	// +optional
	// +listType=map
	// +listMapKey=name
	AccessProviders []AccessProvider `json:"accessProviders,omitempty"`

	// CredentialProviders is the former name of AccessProviders, read when
	// AccessProviders is empty.
	//
	// Deprecated: use AccessProviders.
	//
	// +optional
	// +listType=map
	// +listMapKey=name
	CredentialProviders []CredentialProvider `json:"credentialProviders,omitempty"`
}

// ClusterVersion is the version of a cluster's components.
type ClusterVersion struct {
	// Kubernetes is the Kubernetes version of the cluster, e.g. "v1.37.1".
	// +optional
	Kubernetes string `json:"kubernetes,omitempty"`
}

// Property is a name/value pair describing the cluster.
type Property struct {
	// Name of the property, e.g. "cluster.clusterset.k8s.io".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Value of the property.
	// +required
	// +kubebuilder:validation:MaxLength=1024
	Value string `json:"value"`
	// LastObservedTime is when the value was last observed.
	// +optional
	LastObservedTime metav1.Time `json:"lastObservedTime,omitempty"`
}

// AccessProvider is one way to reach the cluster: its name selects a
// credential plugin configured in the controller, and Cluster says where the
// cluster is. It carries no credentials.
type AccessProvider struct {
	// Name of the access provider, e.g. "google" or "token".
	// +required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Cluster is the kubeconfig cluster entry: server, certificate
	// authority, proxy URL and extensions. The extension
	// "client.authentication.k8s.io/exec" is passed to the credential plugin.
	// +optional
	Cluster clientcmdv1.Cluster `json:"cluster,omitempty"`
}

// CredentialProvider is the former name of AccessProvider.
//
// Deprecated: use AccessProvider.
type CredentialProvider = AccessProvider

// +kubebuilder:object:root=true

// ClusterProfileList is a list of ClusterProfiles.
type ClusterProfileList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterProfile `json:"items"`
}

var _ runtime.Object = &ClusterProfile{}
