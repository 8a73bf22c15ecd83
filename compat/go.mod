module sigs.k8s.io/multicluster-runtime

go 1.26.0

require github.com/mcruntime/multicluster-runtime v0.1.0
