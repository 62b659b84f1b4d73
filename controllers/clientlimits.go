package controllers

// The manager's client limits and worker counts, Cluster API v1.14's defaults for its own
// managers (core/main.go): cmd/manager's --kube-api-qps and --kube-api-burst toward the
// management cluster's API server; --clustercache-client-qps and --clustercache-client-burst
// toward each workload cluster's, which serves one cluster and needs less; and how many objects
// of each kind are reconciled at once. Throughput figures in docs/performance.md name the limits
// they were measured at: a faster client only moves the queue to the API server that every
// controller of the management cluster shares.
const (
	DefaultKubeAPIQPS   float32 = 100
	DefaultKubeAPIBurst int     = 200

	DefaultClusterCacheClientQPS   float32 = 20
	DefaultClusterCacheClientBurst int     = 30

	// DefaultClusterConcurrency is Cluster API's cluster-concurrency: DockyardClusters, their
	// Service load balancers and DockyardMachineTemplates reconciled at once, each.
	DefaultClusterConcurrency = 50
	// DefaultMachineConcurrency is Cluster API's machine-concurrency: DockyardMachines and
	// DockyardMachinePools reconciled at once, each.
	DefaultMachineConcurrency = 100
	// DefaultClusterCacheConcurrency is Cluster API's clustercache-concurrency: workload
	// cluster connections set up at once.
	DefaultClusterCacheConcurrency = 100
)
