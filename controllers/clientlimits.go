package controllers

// The manager's client limits: cmd/manager's --kube-api-qps and --kube-api-burst defaults toward the
// management cluster's API server, and the same toward each workload cluster's (its
// ClusterCache). Throughput figures are measured at these: a faster client only moves the queue
// to the API server that every controller of the management cluster shares.
const (
	DefaultKubeAPIQPS   float32 = 20
	DefaultKubeAPIBurst int     = 30
)
