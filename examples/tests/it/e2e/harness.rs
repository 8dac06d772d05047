//! The e2e harness: the cluster client, installation of the CRDs and RBAC, pods, waiting, the
//! controller process, and cleanup.

use std::collections::BTreeMap;
use std::fs::File;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use karpenter_core::crd::{KubeNodeClaim, KubeNodePool};
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
    PostParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use serde_json::{Value, json};

/// The label every object a test creates carries.
pub const E2E_LABEL: &str = "e2e.karpenter-rs/test";

static LOCK: Mutex<()> = Mutex::new(());

/// The environment of one test: the lock, a runtime, the paths.
pub struct Env {
    _lock: MutexGuard<'static, ()>,
    /// The admin kubeconfig.
    pub admin: PathBuf,
    /// The controller's kubeconfig.
    pub controller: PathBuf,
    /// A runtime for the test's async code.
    pub rt: tokio::runtime::Runtime,
}

/// The test environment. The tests that take it are `#[ignore]`d, so a plain `cargo test`
/// reports them as ignored; run with `--ignored` (as scripts/test does) and without a control
/// plane, they fail: a test never passes without its real component.
pub fn env(test: &str) -> Env {
    let admin = std::env::var_os("KARPENTER_E2E_KUBECONFIG").map(PathBuf::from);
    let controller = std::env::var_os("KARPENTER_E2E_CONTROLLER_KUBECONFIG").map(PathBuf::from);
    let (Some(admin), Some(controller)) = (admin, controller) else {
        panic!(
            "{test}: no control plane: KARPENTER_E2E_KUBECONFIG and \
             KARPENTER_E2E_CONTROLLER_KUBECONFIG are unset (scripts/test starts the control \
             plane and sets them; or run scripts/control-plane/up.sh and set them)"
        );
    };
    let lock = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    Env {
        _lock: lock,
        admin,
        controller,
        rt,
    }
}

/// The environment of a measurement of minutes (the `perf_` tests, run by scripts/e2e-perf.sh;
/// scripts/test skips them).
pub fn perf_env(test: &str) -> Env {
    env(test)
}

/// The admin client of a cluster made ready for a test: the CRDs and RBAC installed, every
/// e2e object of earlier tests gone.
pub async fn ready_cluster(env: &Env, test: &str) -> Client {
    let admin = client(&env.admin).await;
    install(&admin).await;
    cleanup(&admin, test).await;
    admin
}

/// A field of `/proc/<pid>/status` in KiB (`VmRSS:`, `VmHWM:`); 0 when unreadable.
pub fn proc_status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .unwrap_or(0)
}

/// CPU seconds (user + system) a process has used.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks: f64 = fields
        .get(11)
        .and_then(|u| u.parse::<f64>().ok())
        .unwrap_or(0.0)
        + fields
            .get(12)
            .and_then(|s| s.parse::<f64>().ok())
            .unwrap_or(0.0);
    ticks / 100.0
}

/// The `karpenter` binary the tests run: `KARPENTER_E2E_BIN` when set (a release build, for
/// the measurements), else the one cargo built for this test binary.
pub fn karpenter_bin() -> PathBuf {
    std::env::var_os("KARPENTER_E2E_BIN")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_karpenter")))
}

/// The `custom_controller` example of karpenter-controller, which `cargo test --workspace`
/// builds beside the `karpenter` binary (`target/debug/examples/`).
pub fn custom_controller_example() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_karpenter"));
    let path = bin
        .parent()
        .expect("the binary has a directory")
        .join("examples")
        .join("custom_controller");
    assert!(
        path.exists(),
        "{} is missing: build it with `cargo build -p karpenter-controller --example custom_controller`",
        path.display()
    );
    path
}

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("examples/ has a parent")
        .to_path_buf()
}

/// A client from a kubeconfig file.
pub async fn client(path: &PathBuf) -> Client {
    let kc = Kubeconfig::read_from(path).expect("kubeconfig readable");
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("kubeconfig valid");
    Client::try_from(config).expect("client")
}

/// Polls `f` every 250 ms until it returns `Some`, or panics after `timeout` naming `what`.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        if start.elapsed() > timeout {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn api_resource(gvk: &GroupVersionKind) -> ApiResource {
    let plural = match gvk.kind.as_str() {
        "NodePool" => "nodepools",
        "NodeClaim" => "nodeclaims",
        "NodeOverlay" => "nodeoverlays",
        "EC2NodeClass" => "ec2nodeclasses",
        "KWOKNodeClass" => "kwoknodeclasses",
        "Namespace" => "namespaces",
        "ServiceAccount" => "serviceaccounts",
        "ClusterRole" => "clusterroles",
        "ClusterRoleBinding" => "clusterrolebindings",
        "Role" => "roles",
        "RoleBinding" => "rolebindings",
        "CustomResourceDefinition" => "customresourcedefinitions",
        other => panic!("the e2e harness does not apply {other}"),
    };
    ApiResource::from_gvk_with_plural(gvk, plural)
}

/// Server-side applies every document of a YAML text (field manager `e2e`), retrying while a
/// just-established CRD is not served yet.
pub async fn apply_yaml(client: &Client, text: &str) -> Vec<DynamicObject> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(text).expect("valid YAML");
    let mut out = Vec::new();
    for doc in docs.into_iter().filter(|d| !d.is_null()) {
        out.push(apply_value(client, doc).await);
    }
    out
}

/// Server-side applies one object.
pub async fn apply_value(client: &Client, doc: Value) -> DynamicObject {
    let obj: DynamicObject = serde_json::from_value(doc.clone()).expect("an object");
    let types = obj.types.clone().expect("apiVersion and kind");
    let gvk = GroupVersionKind::try_from(&types).expect("gvk");
    let ar = api_resource(&gvk);
    let name = obj.metadata.name.clone().expect("a name");
    let api: Api<DynamicObject> = match &obj.metadata.namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    let params = PatchParams::apply("e2e").force();
    let start = Instant::now();
    loop {
        match api.patch(&name, &params, &Patch::Apply(&doc)).await {
            Ok(o) => return o,
            Err(e) if start.elapsed() < Duration::from_secs(30) => {
                eprintln!("apply {} {name}: {e}; retrying", gvk.kind);
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => panic!("apply {} {name}: {e}", gvk.kind),
        }
    }
}

/// Installs what the controller needs: the CRDs (`karpenter crds --kwok`, waited for
/// Established) and the RBAC and namespace of `deploy/`.
pub async fn install(client: &Client) {
    let crds = karpenter_controller::crds::with_kwok(true)
        .and_then(|crds| karpenter_controller::crds::to_yaml(&crds))
        .expect("CRDs render");
    apply_yaml(client, &crds).await;
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for name in [
        "nodepools.karpenter.sh",
        "nodeclaims.karpenter.sh",
        "nodeoverlays.karpenter.sh",
        "ec2nodeclasses.karpenter.k8s.aws",
        "kwoknodeclasses.karpenter.kwok.sh",
    ] {
        wait_for(
            &format!("CRD {name} Established"),
            Duration::from_secs(30),
            || async {
                let crd = api.get(name).await.ok()?;
                let established = crd
                    .status?
                    .conditions?
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True");
                established.then_some(())
            },
        )
        .await;
    }
    for file in ["namespace.yaml", "rbac.yaml", "rbac-fake-provider.yaml"] {
        let text = std::fs::read_to_string(repo_root().join("deploy").join(file))
            .expect("deploy/ manifest");
        apply_yaml(client, &text).await;
    }
}

/// A free loopback port.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A running `karpenter controller` process (killed on drop).
pub struct Controller {
    child: Option<Child>,
    /// Its log file (JSON lines).
    pub log: PathBuf,
    /// The metrics port.
    pub metrics_port: u16,
    /// The probe port.
    pub probe_port: u16,
    /// Its Lease identity.
    pub identity: String,
}

impl Controller {
    /// Starts `karpenter controller --cloud-provider fake` as the karpenter service account.
    pub fn start(env: &Env, identity: &str, extra: &[&str]) -> Controller {
        Controller::start_bin(env, &karpenter_bin(), identity, extra)
    }

    /// Starts `karpenter controller --cloud-provider kwok` (upstream's kwok provider) as the
    /// karpenter service account.
    pub fn start_kwok(env: &Env, identity: &str, extra: &[&str]) -> Controller {
        Controller::start_command(
            env,
            &karpenter_bin(),
            &["controller", "--cloud-provider", "kwok"],
            identity,
            extra,
        )
    }

    /// Starts `bin controller --cloud-provider fake` as the karpenter service account.
    pub fn start_bin(
        env: &Env,
        bin: &std::path::Path,
        identity: &str,
        extra: &[&str],
    ) -> Controller {
        Controller::start_command(
            env,
            bin,
            &["controller", "--cloud-provider", "fake"],
            identity,
            extra,
        )
    }

    /// Starts `bin LEAD... FLAGS... EXTRA...` as the karpenter service account, where FLAGS are
    /// the controller flags every test passes (kubeconfig, ports, Lease, log level).
    pub fn start_command(
        env: &Env,
        bin: &std::path::Path,
        lead: &[&str],
        identity: &str,
        extra: &[&str],
    ) -> Controller {
        Controller::start_command_env(env, bin, lead, identity, extra, &[])
    }

    /// [`Controller::start_command`] with the environment variables `vars` (the AWS mode's
    /// settings); with any, nothing else of the test's environment but `PATH`, `HOME` and
    /// `RUST_BACKTRACE` is passed on.
    pub fn start_command_env(
        env: &Env,
        bin: &std::path::Path,
        lead: &[&str],
        identity: &str,
        extra: &[&str],
        vars: &[(String, String)],
    ) -> Controller {
        let metrics_port = free_port();
        let probe_port = free_port();
        let dir = std::env::temp_dir().join("karpenter-rs-e2e");
        std::fs::create_dir_all(&dir).expect("log dir");
        let log = dir.join(format!("{identity}.log"));
        let out = File::create(&log).expect("log file");
        let err = out.try_clone().expect("log file");
        let mut command = Command::new(bin);
        if !vars.is_empty() {
            // Only the given settings: no AWS_* (or other) variable of the test's environment.
            command.env_clear();
            for keep in ["PATH", "HOME", "RUST_BACKTRACE"] {
                if let Some(v) = std::env::var_os(keep) {
                    command.env(keep, v);
                }
            }
        }
        let child = command
            .args(lead)
            .arg("--kubeconfig")
            .arg(&env.controller)
            .args(["--bind-address", "127.0.0.1"])
            .args(["--metrics-port", &metrics_port.to_string()])
            .args(["--health-probe-port", &probe_port.to_string()])
            .args(["--leader-election-namespace", "karpenter"])
            .args(["--leader-election-identity", identity])
            .args(["--log-level", "debug"])
            .args(extra)
            .env_remove("KUBECONFIG")
            .envs(vars.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .expect("karpenter controller starts");
        Controller {
            child: Some(child),
            log,
            metrics_port,
            probe_port,
            identity: identity.to_string(),
        }
    }

    /// Waits until `/readyz` answers 200 (panics after `timeout`).
    pub async fn wait_ready(&self, timeout: Duration) {
        wait_for("controller ready", timeout, || async {
            self.get(self.probe_port, "/readyz")
                .await
                .filter(|(s, _)| *s == 200)
        })
        .await;
    }

    /// The process id (0 once stopped).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(Child::id).unwrap_or(0)
    }

    /// The log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGKILL, as a crash.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM and wait (graceful shutdown); returns the exit status.
    pub fn terminate(&mut self) -> Option<i32> {
        let mut c = self.child.take()?;
        let _ = Command::new("kill")
            .args(["-TERM", &c.id().to_string()])
            .status();
        let start = Instant::now();
        loop {
            if let Ok(Some(s)) = c.try_wait() {
                return s.code();
            }
            if start.elapsed() > Duration::from_secs(20) {
                let _ = c.kill();
                let _ = c.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Whether the process still runs.
    pub fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// GET `path` on one of its ports; `(status, body)`.
    pub async fn get(&self, port: u16, path: &str) -> Option<(u16, String)> {
        let path = path.to_string();
        tokio::task::spawn_blocking(move || http_get(port, &path))
            .await
            .ok()?
    }
}

fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).ok()?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).ok()?;
    let text = String::from_utf8_lossy(&buf).to_string();
    let status: u16 = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string())?;
    Some((status, body))
}

impl Drop for Controller {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A pod of the test `test`, requesting `cpu` and `memory`, with extra labels and annotations.
pub fn pod(
    test: &str,
    name: &str,
    cpu: &str,
    memory: &str,
    annotations: BTreeMap<String, String>,
) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {E2E_LABEL: test, "app": test},
            "annotations": annotations,
        },
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [{
                "name": "app",
                "image": "registry.invalid/pause:1",
                "resources": {"requests": {"cpu": cpu, "memory": memory}}
            }]
        }
    }))
    .expect("a pod")
}

/// Creates pods.
pub async fn create_pods(client: &Client, pods: &[Pod]) {
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    for p in pods {
        api.create(&PostParams::default(), p)
            .await
            .unwrap_or_else(|e| panic!("create pod {:?}: {e}", p.metadata.name));
    }
}

/// The test's pods.
pub async fn pods_of(client: &Client, test: &str) -> Vec<Pod> {
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    api.list(&ListParams::default().labels(&format!("{E2E_LABEL}={test}")))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
}

/// NodeClaims.
pub async fn nodeclaims(client: &Client) -> Vec<KubeNodeClaim> {
    Api::<KubeNodeClaim>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
}

/// Nodes played by kwok.
pub async fn kwok_nodes(client: &Client) -> Vec<Node> {
    Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|n| {
            n.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("kwok.x-k8s.io/node"))
                .is_some_and(|v| v == "fake")
        })
        .collect()
}

/// Every e2e test's pods (whatever test made them).
pub async fn all_e2e_pods(client: &Client) -> Vec<Pod> {
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    api.list(&ListParams::default().labels(E2E_LABEL))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
}

/// Deletes everything the e2e tests made: the pods of *every* test (a test that failed, or a
/// run that was interrupted, leaves its pods behind; pending, they would make the next test's
/// controller provision for them), every NodeClaim and kwok Node (finalizers removed, since the
/// controller may be gone), every NodePool and KWOKNodeClass, and the Lease. Tests call it
/// first and last, so a failed test's leftovers are gone before the next test starts.
pub async fn cleanup(client: &Client, test: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let lp = ListParams::default().labels(E2E_LABEL);
    let _ = pods
        .delete_collection(&DeleteParams::default().grace_period(0), &lp)
        .await;
    let unfinalize = json!({"metadata": {"finalizers": null}});
    let claims: Api<KubeNodeClaim> = Api::all(client.clone());
    for c in nodeclaims(client).await {
        let name = c.metadata.name.clone().unwrap_or_default();
        let _ = claims
            .patch(&name, &PatchParams::default(), &Patch::Merge(&unfinalize))
            .await;
        let _ = claims.delete(&name, &DeleteParams::default()).await;
    }
    let nodes: Api<Node> = Api::all(client.clone());
    for n in kwok_nodes(client).await {
        let name = n.metadata.name.clone().unwrap_or_default();
        let _ = nodes
            .patch(&name, &PatchParams::default(), &Patch::Merge(&unfinalize))
            .await;
        let _ = nodes.delete(&name, &DeleteParams::default()).await;
    }
    let pools: Api<KubeNodePool> = Api::all(client.clone());
    let _ = pools
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await;
    let classes: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &karpenter_controller::kwok_upstream::nodeclass_resource(),
    );
    let _ = classes
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "karpenter");
    let _ = leases
        .delete("karpenter-leader-election", &DeleteParams::default())
        .await;
    // Pods bound to deleted nodes are deleted by kwok only while it plays the node: remove the
    // rest directly.
    wait_for(
        &format!("{test}: pods, nodeclaims and nodes gone"),
        Duration::from_secs(300),
        || async {
            let left = all_e2e_pods(client).await;
            for p in &left {
                let _ = pods
                    .delete(
                        p.metadata.name.as_deref().unwrap_or_default(),
                        &DeleteParams::default().grace_period(0),
                    )
                    .await;
            }
            (left.is_empty()
                && nodeclaims(client).await.is_empty()
                && kwok_nodes(client).await.is_empty())
            .then_some(())
        },
    )
    .await;
}
