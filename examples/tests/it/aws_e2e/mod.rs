//! The AWS mode end to end: `karpenter controller` with `CLOUD_PROVIDER=aws`, two replicas, on
//! the loopback control plane (scripts/control-plane/up.sh) and moto (scripts/moto/), as the
//! install guide (docs/deploy-eks.md) and the chart configure it.
//!
//! Real components: the control plane (`KARPENTER_E2E_KUBECONFIG`,
//! `KARPENTER_E2E_CONTROLLER_KUBECONFIG`, as the fake-mode e2e), moto
//! (`KARPENTER_MOTO_ENDPOINT`, or the virtualenv of scripts/moto/install.sh started here) with
//! the two stand-ins of scripts/moto/server.py (AWS's public EKS AMI parameters in SSM, the
//! Price List API), and the chart as scripts/helm-check.sh renders it with the install notes'
//! values (`KARPENTER_CHART_RENDERED`): the controller runs with that Deployment's environment
//! (the cluster name and queue set to the test's; no endpoint: eks:DescribeCluster on moto
//! gives it) under that ClusterRole and Role, and no other binding. AWS credentials are moto's
//! static ones where EKS would give IRSA's (`AWS_ENDPOINT_URL` points the SDK at moto).
//!
//! One piece is simulated: the kubelet ([`kubelet`]). moto's instances run nothing, so the
//! harness registers each running instance of the cluster as a Node as the kubelet would
//! (name = the private DNS name, providerID `aws:///ZONE/i-...`, the labels and taints
//! Karpenter's user data passes to the kubelet, the capacity of its instance type), annotated
//! `kwok.x-k8s.io/node=fake` so that kwok reports it Ready and runs its pods.
//!
//! The tests are `#[ignore]`d; scripts/test runs them with `--ignored aws_e2e::` when the
//! control plane, moto and the rendered chart are all there. Run without one of them they fail.
//! They share the control plane with the fake-mode e2e (one lock) and each uses a cluster of
//! its own in moto. Any 403 in either replica's log fails a test.

mod kubelet;
mod scenarios;
mod world;
