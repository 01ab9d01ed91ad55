// Package cluster starts a one-node Kubernetes cluster on this machine for the tests that need pods
// to run: etcd and kube-apiserver (envtest's binaries), kube-controller-manager, kube-scheduler, a
// kubelet on containerd and runc, kube-proxy, and CoreDNS for the pods' lookups of cluster.local
// (nothing else resolves), every component a process, as Kubernetes'
// hack/local-up-cluster.sh runs them. Images are imported into containerd, never pulled: no registry
// is reachable, and pods name them with imagePullPolicy IfNotPresent or Never.
//
// What a cluster makes that outlives its processes (containers, mounts, network namespaces, cgroups,
// iptables rules, the pod network's bridge, kernel settings the kubelet changes) is recorded before
// it is made and removed by Stop, or by the next Start on the machine when a run was killed. The pod
// network is a bridge with no route and no masquerade beyond this machine.
package cluster
