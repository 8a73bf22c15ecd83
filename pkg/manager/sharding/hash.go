package sharding

import (
	"crypto/sha256"
	"encoding/hex"
	"hash/fnv"
	"math"
)

// Labels and annotations on the Leases this package writes.
const (
	// LabelGroup holds Options.Name on every Lease of a group.
	LabelGroup = "sharding.multicluster-runtime.io/group"
	// LabelRole is "member" on a replica's Lease and "fence" on a cluster's
	// (see roleReplica).
	LabelRole = "sharding.multicluster-runtime.io/role"
	// AnnotationWeight holds a replica's weight.
	AnnotationWeight = "sharding.multicluster-runtime.io/weight"
	// AnnotationCluster holds the cluster name of a fence (Lease names are hashes,
	// since cluster names need not be valid object names).
	AnnotationCluster = "sharding.multicluster-runtime.io/cluster"

	// annotationIncarnation tells processes with the same identity apart.
	annotationIncarnation = "sharding.multicluster-runtime.io/incarnation"

	// annotationToken identifies one acquisition of a fence.
	annotationToken = "sharding.multicluster-runtime.io/token"

	// roleReplica marks a replica's Lease. Its value, and so the Lease names
	// ("<group>-member-<hash>"), predate the word "replica" and stay as they
	// are: replicas of both releases share a group during a rolling upgrade.
	roleReplica = "member"
	roleFence   = "fence"
)

// leaseName names a replica or fence Lease: the group name, the role, and a hash
// of the identity or cluster name (which may hold any character).
func leaseName(group, role, key string) string {
	sum := sha256.Sum256([]byte(key))
	return group + "-" + role + "-" + hex.EncodeToString(sum[:10])
}

// peer is a live replica as assignment sees it.
type peer struct {
	identity string
	weight   int
}

// score is the weighted rendezvous (highest random weight) score of a peer for
// a cluster: -weight/ln(u) with u uniform in (0,1) from a hash of both. The
// cluster goes to the highest score, so adding a peer moves only the clusters
// the new peer wins, and removing one moves only the clusters it held; each peer
// wins a share proportional to its weight.
func score(p peer, cluster string) float64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(p.identity))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(cluster))
	x := mix64(h.Sum64())
	u := (float64(x>>11) + 0.5) / (1 << 53) // uniform in (0,1), never 0 or 1
	return -float64(p.weight) / math.Log(u)
}

// mix64 is splitmix64's finaliser: FNV alone spreads similar keys poorly.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// owner returns the identity among peers that the cluster is assigned to, or ""
// when there are no peers.
func owner(peers []peer, cluster string) string {
	best, bestScore := "", math.Inf(-1)
	for _, p := range peers {
		if p.weight <= 0 {
			continue
		}
		s := score(p, cluster)
		if s > bestScore || (s == bestScore && p.identity < best) {
			best, bestScore = p.identity, s
		}
	}
	return best
}
