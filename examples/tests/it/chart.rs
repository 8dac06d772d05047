//! The Helm chart (`charts/karpenter/`): its CRDs are `karpenter crds`' output, its RBAC is
//! `deploy/rbac.yaml`'s, and what `helm template` renders with the install notes' values has
//! the controller's settings, keeps the controller off Karpenter-managed nodes and is accepted
//! by a real kube-apiserver (server-side dry run).
//!
//! The rendering needs helm, which `scripts/helm-check.sh` installs (pinned, cached) and runs:
//! it writes the rendered manifests to a directory and `scripts/test` passes it here as
//! `KARPENTER_CHART_RENDERED`, with the control plane's admin kubeconfig as
//! `KARPENTER_E2E_KUBECONFIG`. The tests that need them are `#[ignore]`d (reported as ignored by
//! a plain `cargo test`; `-- --ignored chart::` runs them and without them they fail). The CRD
//! and RBAC comparisons need neither and always run.

use std::collections::BTreeSet;
use std::path::PathBuf;

use kube::api::{DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::discovery::Scope;
use kube::{Api, Client, Config};
use serde_json::{Value, json};

use super::karpenter;

/// The repository root.
fn repo() -> PathBuf {
    super::root()
        .parent()
        .expect("examples/ has a parent")
        .to_path_buf()
}

/// `charts/karpenter/<rel>`.
fn chart(rel: &str) -> PathBuf {
    repo().join("charts").join("karpenter").join(rel)
}

fn read(path: &PathBuf) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every non-empty document of a multi-document YAML text.
fn docs(text: &str, what: &str) -> Vec<Value> {
    let all: Vec<Value> =
        serde_saphyr::from_multiple(text).unwrap_or_else(|e| panic!("{what}: invalid YAML: {e}"));
    all.into_iter().filter(|d| !d.is_null()).collect()
}

/// The one document of `kind` named `name`.
fn find<'a>(docs: &'a [Value], kind: &str, name: &str, what: &str) -> &'a Value {
    let found: Vec<&Value> = docs
        .iter()
        .filter(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "{what}: expected one {kind} {name}, found {}",
        found.len()
    );
    found[0]
}

/// The file of one CRD in the chart: `crds/<group>_<plural>.yaml`, as upstream names them.
fn crd_file_name(doc: &Value) -> String {
    format!(
        "{}_{}.yaml",
        doc["spec"]["group"].as_str().expect("spec.group"),
        doc["spec"]["names"]["plural"]
            .as_str()
            .expect("spec.names.plural")
    )
}

#[test]
fn chart_crds_are_karpenter_crds_output() {
    let run = karpenter(&["crds"], "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let crds = karpenter_controller::crds::all();
    assert!(!crds.is_empty());
    let mut expected_files = BTreeSet::new();
    let mut concatenated = String::new();
    for crd in &crds {
        let text =
            karpenter_controller::crds::to_yaml(std::slice::from_ref(crd)).expect("CRD renders");
        let doc = &docs(&text, "karpenter crds")[0];
        let name = crd_file_name(doc);
        let path = chart("crds").join(&name);
        if std::env::var_os("UPDATE_EXPECT").is_some() {
            std::fs::create_dir_all(chart("crds")).expect("crds/");
            std::fs::write(&path, &text).expect("write CRD");
        }
        let actual = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (run with UPDATE_EXPECT=1 to write it from `karpenter crds`)",
                path.display()
            )
        });
        assert!(
            actual == text,
            "{} differs from `karpenter crds` (run with UPDATE_EXPECT=1 to regenerate it)",
            path.display()
        );
        concatenated.push_str(&actual);
        expected_files.insert(name);
    }
    // The chart's files, in `karpenter crds`' order, are exactly the binary's output.
    assert_eq!(concatenated, run.stdout);
    let present: BTreeSet<String> = std::fs::read_dir(chart("crds"))
        .expect("charts/karpenter/crds")
        .map(|e| {
            e.expect("dir entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(
        present, expected_files,
        "charts/karpenter/crds holds files `karpenter crds` does not generate"
    );
}

#[test]
fn chart_version_is_the_workspace_version() {
    let path = chart("Chart.yaml");
    let meta: Value = serde_saphyr::from_str(&read(&path)).expect("Chart.yaml is YAML");
    // appVersion is the default image tag: the image built from this workspace.
    assert_eq!(
        meta["appVersion"],
        env!("CARGO_PKG_VERSION"),
        "{}",
        path.display()
    );
    assert_eq!(
        meta["version"],
        env!("CARGO_PKG_VERSION"),
        "{}",
        path.display()
    );
}

/// The rules of the ClusterRole or Role `name` in a deploy/ manifest.
fn deploy_rules(file: &str, kind: &str, name: &str) -> Value {
    let path = repo().join("deploy").join(file);
    let all = docs(&read(&path), file);
    find(&all, kind, name, file)["rules"].clone()
}

/// A rules file of the chart (`files/*.yaml`: a YAML list).
fn chart_rules(file: &str) -> Value {
    let path = chart("files").join(file);
    serde_saphyr::from_str(&read(&path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn chart_rbac_is_the_rbac_the_e2e_tests_run_under() {
    for (chart_file, deploy_file, kind, name) in [
        (
            "clusterrole-rules.yaml",
            "rbac.yaml",
            "ClusterRole",
            "karpenter",
        ),
        ("role-rules.yaml", "rbac.yaml", "Role", "karpenter"),
        (
            "fake-provider-rules.yaml",
            "rbac-fake-provider.yaml",
            "ClusterRole",
            "karpenter-fake-provider",
        ),
    ] {
        let ours = chart_rules(chart_file);
        assert!(
            ours.as_array().is_some_and(|r| !r.is_empty()),
            "{chart_file}: no rules"
        );
        assert_eq!(
            ours,
            deploy_rules(deploy_file, kind, name),
            "charts/karpenter/files/{chart_file} differs from {kind} {name} in deploy/{deploy_file}"
        );
    }
}

/// The directory `scripts/helm-check.sh` rendered the chart into (`KARPENTER_CHART_RENDERED`).
/// The tests that need it are `#[ignore]`d, so a plain `cargo test` reports them as ignored;
/// run with `--ignored` (as scripts/test does) and without it, they fail.
fn rendered_dir(test: &str) -> PathBuf {
    match std::env::var_os("KARPENTER_CHART_RENDERED") {
        Some(dir) => PathBuf::from(dir),
        None => panic!(
            "{test}: KARPENTER_CHART_RENDERED is unset (scripts/test runs scripts/helm-check.sh \
             and sets it)"
        ),
    }
}

/// The documents of one rendering (`<dir>/<name>.yaml`).
fn rendered(dir: &std::path::Path, name: &str) -> Vec<Value> {
    let path = dir.join(format!("{name}.yaml"));
    docs(&read(&path), &path.display().to_string())
}

/// The controller container's env as (name, value or "<from>") pairs.
fn env_of(deployment: &Value) -> Vec<(String, String)> {
    let c = &deployment["spec"]["template"]["spec"]["containers"][0];
    c["env"]
        .as_array()
        .expect("env")
        .iter()
        .map(|e| {
            let name = e["name"].as_str().expect("env name").to_string();
            let value = match &e["value"] {
                Value::String(s) => s.clone(),
                _ => "<from>".to_string(),
            };
            (name, value)
        })
        .collect()
}

fn env_value<'a>(env: &'a [(String, String)], name: &str) -> Option<&'a str> {
    env.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
}

/// Every required node selector term keeps Karpenter-managed nodes out.
fn assert_excludes_karpenter_nodes(deployment: &Value, what: &str) {
    let terms = deployment["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
        ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        .as_array()
        .unwrap_or_else(|| panic!("{what}: no required node affinity"));
    assert!(!terms.is_empty(), "{what}: no node selector terms");
    for term in terms {
        let excluded = term["matchExpressions"].as_array().is_some_and(|es| {
            es.iter()
                .any(|e| e["key"] == "karpenter.sh/nodepool" && e["operator"] == "DoesNotExist")
        });
        assert!(
            excluded,
            "{what}: term {term} admits Karpenter-managed nodes"
        );
    }
}

#[test]
#[ignore = "needs the chart rendered by scripts/helm-check.sh (KARPENTER_CHART_RENDERED): scripts/test runs these with --ignored"]
fn install_notes_rendering_carries_the_settings_and_pins_the_controller() {
    let dir = rendered_dir("install_notes_rendering");
    let all = rendered(&dir, "install-notes");
    let what = "install-notes rendering";
    let dep = find(&all, "Deployment", "karpenter", what);
    assert_eq!(dep["metadata"]["namespace"], "kube-system");
    assert_excludes_karpenter_nodes(dep, what);
    let spec = &dep["spec"]["template"]["spec"];
    // Pinned to the existing node group, as the install notes do by hand.
    let term = &spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"][0]["matchExpressions"];
    assert!(
        term.as_array().is_some_and(|es| es.iter().any(|e| e
            == &json!({"key": "eks.amazonaws.com/nodegroup", "operator": "In", "values": ["my-nodegroup"]}))),
        "{what}: not pinned to the node group: {term}"
    );
    // Replicas spread over hosts (the anti-affinity gets the release's selector) and zones.
    let anti =
        &spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0];
    assert_eq!(anti["topologyKey"], "kubernetes.io/hostname");
    assert_eq!(
        anti["labelSelector"]["matchLabels"],
        json!({"app.kubernetes.io/name": "karpenter", "app.kubernetes.io/instance": "karpenter"})
    );
    assert_eq!(
        spec["topologySpreadConstraints"][0]["topologyKey"],
        "topology.kubernetes.io/zone"
    );
    assert!(spec["topologySpreadConstraints"][0]["labelSelector"].is_object());
    // Settings become the controller's environment.
    let env = env_of(dep);
    assert_eq!(env_value(&env, "CLUSTER_NAME"), Some("my-cluster"));
    assert_eq!(env_value(&env, "INTERRUPTION_QUEUE"), Some("my-cluster"));
    assert_eq!(env_value(&env, "CLOUD_PROVIDER"), Some("aws"));
    assert_eq!(env_value(&env, "LOG_LEVEL"), Some("info"));
    assert_eq!(
        env_value(&env, "FEATURE_GATES"),
        Some(
            "NodeRepair=false,ReservedCapacity=true,SpotToSpotConsolidation=false,NodeOverlay=false,StaticCapacity=false"
        )
    );
    assert_eq!(env_value(&env, "SYSTEM_NAMESPACE"), Some("<from>"));
    let c = &spec["containers"][0];
    assert_eq!(
        c["resources"],
        json!({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}})
    );
    assert_eq!(c["image"], "karpenter-rs:0.1.0");
    assert_eq!(c["args"], json!(["controller"]));
    // The IRSA role on the service account the pods run as.
    let sa = find(&all, "ServiceAccount", "karpenter", what);
    assert_eq!(
        sa["metadata"]["annotations"]["eks.amazonaws.com/role-arn"],
        "arn:aws:iam::111122223333:role/KarpenterControllerRole-my-cluster"
    );
    assert_eq!(spec["serviceAccountName"], "karpenter");
    // RBAC: deploy/rbac.yaml's rules, bound to that service account.
    assert_eq!(
        find(&all, "ClusterRole", "karpenter", what)["rules"],
        deploy_rules("rbac.yaml", "ClusterRole", "karpenter")
    );
    assert_eq!(
        find(&all, "Role", "karpenter", what)["rules"],
        deploy_rules("rbac.yaml", "Role", "karpenter")
    );
    for binding in [
        find(&all, "ClusterRoleBinding", "karpenter", what),
        find(&all, "RoleBinding", "karpenter", what),
    ] {
        assert_eq!(
            binding["subjects"],
            json!([{"kind": "ServiceAccount", "name": "karpenter", "namespace": "kube-system"}])
        );
    }
    // Metrics Service and PDB select the controller's pods; no ServiceMonitor by default.
    let svc = find(&all, "Service", "karpenter", what);
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], "http-metrics");
    assert_eq!(
        svc["spec"]["selector"],
        dep["spec"]["selector"]["matchLabels"]
    );
    let pdb = find(&all, "PodDisruptionBudget", "karpenter", what);
    assert_eq!(pdb["spec"]["maxUnavailable"], 1);
    assert!(!all.iter().any(|d| d["kind"] == "ServiceMonitor"));
    // The CRDs come along (--include-crds), as `karpenter crds` prints them.
    let crds: Vec<&Value> = all
        .iter()
        .filter(|d| d["kind"] == "CustomResourceDefinition")
        .collect();
    assert_eq!(crds.len(), karpenter_controller::crds::all().len());
}

#[test]
#[ignore = "needs the chart rendered by scripts/helm-check.sh (KARPENTER_CHART_RENDERED): scripts/test runs these with --ignored"]
fn upstream_values_render_without_duplicate_env_and_keep_off_karpenter_nodes() {
    let dir = rendered_dir("upstream_values_rendering");
    let what = "upstream-values rendering";
    let all = rendered(&dir, "upstream-values");
    let dep = find(&all, "Deployment", "karpenter", what);
    // Their affinity has no node affinity at all: the chart adds the exclusion.
    assert_excludes_karpenter_nodes(dep, what);
    let env = env_of(dep);
    let names: BTreeSet<&str> = env.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names.len(),
        env.len(),
        "{what}: an env name appears twice: {env:?}"
    );
    // controller.env replaces the setting of the same name.
    assert_eq!(
        env_value(&env, "INTERRUPTION_QUEUE"),
        Some("my-cluster-karpenter")
    );
    assert_eq!(env_value(&env, "CLUSTER_NAME"), Some("my-cluster"));
}

/// The settings the AWS provider reads itself (not `karpenter controller` flags).
const AWS_PROVIDER_ENV: &[&str] = &[
    "CLUSTER_CA_BUNDLE",
    "ISOLATED_VPC",
    "VM_MEMORY_OVERHEAD_PERCENT",
    "RESERVED_ENIS",
    "DISABLE_DRY_RUN",
];

/// Where the AWS provider reads them.
const AWS_PROVIDER_SOURCE: &str = include_str!("../../../karpenter-controller/src/aws.rs");

#[test]
#[ignore = "needs the chart rendered by scripts/helm-check.sh (KARPENTER_CHART_RENDERED): scripts/test runs these with --ignored"]
fn every_setting_the_chart_passes_is_a_controller_env_var() {
    let dir = rendered_dir("chart_settings_are_controller_env");
    let help = karpenter(&["controller", "--help"], "");
    assert_eq!(help.code, 0, "{}", help.stderr);
    let all = rendered(&dir, "install-notes");
    let dep = find(&all, "Deployment", "karpenter", "install-notes rendering");
    for (name, _) in env_of(dep) {
        // The pod's namespace and name are read without flags of their own (the defaults of
        // the Lease's namespace and identity), and the help says so.
        let read = if name == "SYSTEM_NAMESPACE" || name == "POD_NAME" {
            help.stdout.contains(&format!("Default: {name}"))
        } else if AWS_PROVIDER_ENV.contains(&name.as_str()) {
            // The AWS provider's settings, read when it starts (feature `aws`).
            AWS_PROVIDER_SOURCE.contains(&format!("\"{name}\""))
        } else {
            help.stdout.contains(&format!("[env: {name}="))
        };
        assert!(
            read,
            "the chart sets {name}, which `karpenter controller` does not read"
        );
    }
}

#[test]
#[ignore = "needs the chart rendered by scripts/helm-check.sh (KARPENTER_CHART_RENDERED): scripts/test runs these with --ignored"]
fn the_guides_19_1_flags_set_the_cluster_queue_and_replicas() {
    let dir = rendered_dir("guide_19_1_rendering");
    let what = "guide 19.1 rendering";
    let all = rendered(&dir, "guide-19-1");
    let dep = find(&all, "Deployment", "karpenter", what);
    assert_eq!(dep["spec"]["replicas"], 2, "{what}");
    let env = env_of(dep);
    assert_eq!(env_value(&env, "CLUSTER_NAME"), Some("my-cluster"));
    assert_eq!(
        env_value(&env, "INTERRUPTION_QUEUE"),
        Some("my-cluster-karpenter")
    );
    assert_excludes_karpenter_nodes(dep, what);
}

#[test]
#[ignore = "needs the chart rendered by scripts/helm-check.sh (KARPENTER_CHART_RENDERED): scripts/test runs these with --ignored"]
fn upstream_chart_defaults_render_as_upstreams_chart_would() {
    let dir = rendered_dir("upstream_chart_defaults_rendering");
    let what = "upstream-chart-defaults rendering";
    let all = rendered(&dir, "upstream-chart-defaults");
    let dep = find(&all, "Deployment", "karpenter", what);
    let pod = &dep["spec"]["template"]["spec"];
    assert_eq!(pod["schedulerName"], "default-scheduler");
    assert_eq!(pod["containers"][0]["name"], "controller");
    assert!(pod.get("initContainers").is_none(), "{what}: {pod}");
    assert_eq!(pod["containers"].as_array().map(Vec::len), Some(1));
    assert_eq!(
        pod["topologySpreadConstraints"][0]["whenUnsatisfiable"],
        "DoNotSchedule"
    );
    let env = env_of(dep);
    for (name, value) in [
        ("CLUSTER_NAME", "my-cluster"),
        ("PREFERENCE_POLICY", "Respect"),
        ("MIN_VALUES_POLICY", "Strict"),
        ("ISOLATED_VPC", "false"),
        ("VM_MEMORY_OVERHEAD_PERCENT", "0.075"),
        ("RESERVED_ENIS", "0"),
        ("DISABLE_CLUSTER_STATE_OBSERVABILITY", "false"),
        ("DISABLE_DRY_RUN", "false"),
        ("BATCH_IDLE_DURATION", "1s"),
        ("BATCH_MAX_DURATION", "10s"),
    ] {
        assert_eq!(env_value(&env, name), Some(value), "{what}: {name}");
    }
    find(&all, "PodDisruptionBudget", "karpenter", what);
}

#[test]
#[ignore = "needs the chart rendered by scripts/helm-check.sh (KARPENTER_CHART_RENDERED): scripts/test runs these with --ignored"]
fn install_notes_rendering_is_accepted_by_the_apiserver() {
    // Also needs the control plane (KARPENTER_E2E_KUBECONFIG).
    let dir = rendered_dir("install_notes_apiserver_dry_run");
    let kubeconfig = std::env::var_os("KARPENTER_E2E_KUBECONFIG")
        .map(PathBuf::from)
        .expect(
            "KARPENTER_E2E_KUBECONFIG is unset: scripts/test starts the control plane and sets it",
        );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    for name in [
        "install-notes",
        "upstream-values",
        "upstream-chart-defaults",
        "guide-19-1",
    ] {
        let all = rendered(&dir, name);
        rt.block_on(dry_run_apply(&kubeconfig, &all, name));
    }
}

/// Server-side applies every document with `dryRun=All`; panics with the API server's message
/// on the first it rejects.
async fn dry_run_apply(kubeconfig: &PathBuf, all: &[Value], what: &str) {
    let kc = Kubeconfig::read_from(kubeconfig).expect("kubeconfig readable");
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("kubeconfig valid");
    let client = Client::try_from(config).expect("client");
    let mut params = PatchParams::apply("karpenter-chart-check").force();
    params.dry_run = true;
    assert!(!all.is_empty(), "{what}: nothing rendered");
    for doc in all {
        let obj: DynamicObject = serde_json::from_value(doc.clone()).expect("an object");
        let types = obj.types.clone().expect("apiVersion and kind");
        let gvk = GroupVersionKind::try_from(&types).expect("group/version/kind");
        let name = obj.metadata.name.clone().expect("metadata.name");
        let (ar, caps) = kube::discovery::pinned_kind(&client, &gvk)
            .await
            .unwrap_or_else(|e| panic!("{what}: the API server does not serve {gvk:?}: {e}"));
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Namespaced => {
                let ns = obj
                    .metadata
                    .namespace
                    .clone()
                    .unwrap_or_else(|| panic!("{what}: {} {name} has no namespace", gvk.kind));
                Api::namespaced_with(client.clone(), &ns, &ar)
            }
            Scope::Cluster => Api::all_with(client.clone(), &ar),
        };
        if let Err(e) = api.patch(&name, &params, &Patch::Apply(doc)).await {
            panic!("{what}: the API server rejects {} {name}: {e}", gvk.kind);
        }
    }
}

/// `prometheusRule.enabled` and `dashboards.enabled` render the rule and the dashboards as the
/// chart's files hold them: the PrometheusRule's groups are `files/alerts.yaml` (its
/// `{{ $labels }}` templates untouched), each ConfigMap carries one `files/dashboards/*.json`.
#[test]
#[ignore = "needs the chart rendered by scripts/helm-check.sh (KARPENTER_CHART_RENDERED): scripts/test runs these with --ignored"]
fn monitoring_renders_the_rule_and_dashboards_as_written() {
    let dir = rendered_dir("monitoring_renders_the_rule_and_dashboards_as_written");
    let objects = rendered(&dir, "monitoring");
    let rule = objects
        .iter()
        .find(|o| o["kind"] == "PrometheusRule")
        .expect("a PrometheusRule");
    assert_eq!(rule["metadata"]["namespace"], "kube-system");
    assert_eq!(rule["metadata"]["labels"]["release"], "prometheus");
    let alerts: Value = serde_saphyr::from_str(&read(&chart("files/alerts.yaml"))).unwrap();
    assert_eq!(rule["spec"]["groups"], alerts);
    assert!(
        rule["spec"]["groups"][0]["rules"][0]["annotations"]["summary"]
            .as_str()
            .is_some_and(|s| s.contains("{{ $labels.nodepool }}"))
    );
    let maps: Vec<&Value> = objects
        .iter()
        .filter(|o| o["kind"] == "ConfigMap" && o["metadata"]["labels"]["grafana_dashboard"] == "1")
        .collect();
    assert_eq!(maps.len(), 4);
    for map in maps {
        let data = map["data"].as_object().expect("data");
        assert_eq!(data.len(), 1);
        let (file, json) = data.iter().next().unwrap();
        let rendered: serde_json::Value = serde_json::from_str(json.as_str().unwrap()).unwrap();
        let original: serde_json::Value =
            serde_json::from_str(&read(&chart(&format!("files/dashboards/{file}")))).unwrap();
        assert_eq!(rendered, original, "{file}");
    }
}
