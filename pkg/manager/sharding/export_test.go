package sharding

// FenceLeaseName exposes the name of a cluster's fence Lease to the tests.
func FenceLeaseName(group, cluster string) string { return leaseName(group, roleFence, cluster) }
