// Package sharding shares a fleet of clusters between the replicas of one
// multi-cluster controller, so that each cluster is served by exactly one live
// replica. It replaces leader election for multi-cluster controllers: run N
// replicas with leader election off and each serves about 1/N of the fleet.
// Users turn it on with mcmanager.WithSharding(sharding.Options{...}); the
// manager's fleet engine consults the Coordinator before it starts a cluster,
// so a replica never starts caches, watches or probes for clusters it does not
// own.
//
// # Replicas and assignment
//
// Each replica keeps a replica Lease on the host cluster
// ("<Name>-member-<hash of Identity>", labelled with role "member": names
// kept from earlier releases, so that old and new replicas of a rolling
// upgrade see each other) and renews it every RetryPeriod. Its
// peers are the replicas whose replica Lease they saw renewed within
// LeaseDuration, measured on their own clock from the moment they observed the
// renewal, so clock skew between replicas does not matter. A cluster is
// assigned to the peer with the highest weighted rendezvous hash of (replica,
// cluster name): every replica computes the same assignment from the same peer
// set, a joining replica takes only the clusters it wins (about its weighted
// share) and a leaving replica's clusters spread over the others. Owns answers
// for this replica; Changed is closed whenever the answer may change.
//
// # Fencing
//
// Assignment alone cannot prevent two replicas from serving a cluster during a
// hand-off, since replicas see peers come and go at different moments. So a
// replica also holds the cluster's fence, a Lease "<Name>-fence-<hash of the
// cluster name>" naming it as holder, for as long as it runs the cluster.
// Acquire takes the fence only when it is free: released by its previous holder,
// or held by a replica whose replica Lease has not been renewed for
// LeaseDuration. Fences are not renewed one by one: a fence is valid while its
// holder's replica Lease is, so renewing costs one API call per RetryPeriod
// whatever the number of clusters. Writes use optimistic concurrency, so of two
// replicas racing for one fence only one wins.
//
// A replica that cannot renew its replica Lease within RenewDeadline ends every
// fenced context and owns nothing; its peers take its clusters over only after
// LeaseDuration. The difference, LeaseDuration - RenewDeadline (5s by default),
// is the time the engine has to stop a cluster after its fenced context ends.
// Deleting fence Leases by hand defeats the guarantee.
//
// # Hand-off
//
// A replica that stops cleanly ends its fenced contexts, deletes its replica
// Lease (peers reassign its clusters at once) and waits up to RenewDeadline for
// the engine to stop the clusters and release their fences; the new owners
// proceed as soon as each fence is released. A replica that dies releases
// nothing: its clusters move when its replica Lease expires, LeaseDuration
// after its last renewal plus up to one RetryPeriod. Replica Leases of replicas
// that died are deleted by their peers after 10 lease durations.
//
// # The host's work
//
// The work that belongs to no member (runnables that need leader election,
// host-owner-only controllers, the combining side of a fleet aggregate) is
// owned by one replica through the same Leases: HostKey is one more key,
// assigned by the same hashing while it has no live holder and kept by its
// holder while that lives, fenced, drained and handed off like a cluster.
// The Multi-Cluster Manager runs that work (see mcmanager.WithSharding).
//
// # Nothing unowned
//
// Census splits the clusters a replica knows into those it runs, those a
// live peer runs and those nobody it knows runs; ReportOwnership exports the
// counts (multicluster_sharding_clusters) and logs, once, each cluster
// unowned for longer than LeaseDuration.
//
// # RBAC
//
// The replicas' service account needs a Role on the host cluster, in
// Options.Namespace, bound to it with a RoleBinding:
//
//	rules:
//	- apiGroups: ["coordination.k8s.io"]
//	  resources: ["leases"]
//	  verbs: ["get", "list", "watch", "create", "update", "delete"]
//
// With kubebuilder markers:
//
//	//+kubebuilder:rbac:groups=coordination.k8s.io,namespace=my-controller-system,resources=leases,verbs=get;list;watch;create;update;delete
package sharding
