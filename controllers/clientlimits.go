package controllers

// The manager's client limits toward the management cluster's API server (main.go's
// --kube-api-qps and --kube-api-burst defaults) and toward each workload cluster's (its
// ClusterCache). Throughput figures are measured at these: a faster client only moves the
// queue to the API server that every controller of the management cluster shares.
const (
	DefaultKubeAPIQPS   float32 = 20
	DefaultKubeAPIBurst int     = 30

	WorkloadClusterQPS   float32 = 20
	WorkloadClusterBurst int     = 30
)
