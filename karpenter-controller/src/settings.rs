//! The controller's settings: upstream's flags and environment variables (same names, same
//! defaults), plus this implementation's own (`--cloud-provider`, `--catalog`, `--kubeconfig`).

use std::time::Duration;

use clap::{Args, ValueEnum};
use karpenter_core::scheduling::{MinValuesPolicy, PreferencePolicy};

/// Which CloudProvider launches instances.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CloudProviderKind {
    /// Amazon EC2 (builds with the `aws` feature).
    Aws,
    /// The in-memory fake provider: every launched NodeClaim gets a Node object annotated
    /// `kwok.x-k8s.io/node: fake`, so kwok (or nothing) plays its kubelet.
    Fake,
    /// Upstream's kwok provider: the kwok catalog (`c-4x-amd64-linux`, ...), NodePools
    /// referencing `KWOKNodeClass`es, Nodes of upstream's shape played by kwok: what upstream's
    /// end-to-end suites run against.
    Kwok,
}

/// How the fake provider names the instances (kwok Nodes) it launches
/// (`--fake-instance-names`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum FakeInstanceNames {
    /// After the NodeClaim, as upstream's kwok provider does: a launch retried after a crash
    /// finds the Node it already made.
    #[default]
    Claim,
    /// A new name for every launch (`<nodeclaim>-<suffix>`), as a real cloud's instance ids:
    /// a launch retried after a crash makes a second instance, which garbage collection must
    /// find and terminate. For fault tests of the controller.
    Unique,
}

/// Log levels (`LOG_LEVEL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogLevel {
    /// Debug and above.
    Debug,
    /// Info and above (the default).
    Info,
    /// Warnings and errors.
    Warn,
    /// Errors only.
    Error,
}

impl LogLevel {
    /// The `tracing` filter directive for this level.
    pub fn directive(self) -> &'static str {
        match self {
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
            LogLevel::Error => "error",
        }
    }
}

/// `karpenter controller` settings. Each flag can also be set by the environment variable
/// named after it, as upstream's chart does.
#[derive(Debug, Clone, Args)]
#[command(after_help = CONTROLLER_AFTER_HELP)]
pub struct ControllerArgs {
    /// Which CloudProvider launches instances: aws, fake (kwok Nodes of --catalog's types) or
    /// kwok (upstream's kwok provider: its catalog, KWOKNodeClass and Node shape).
    #[arg(long, env = "CLOUD_PROVIDER", value_enum, default_value = "aws")]
    pub cloud_provider: CloudProviderKind,
    /// Instance types of the fake provider: aws (the embedded us-east-1 catalog), fake:N, or a
    /// catalog file (as `karpenter plan --catalog`). Not read by kwok, whose catalog is fixed.
    #[arg(long, env = "CATALOG", value_name = "SPEC", default_value = "aws")]
    pub catalog: String,
    /// How the fake provider names its instances: claim (after the NodeClaim, so a retried
    /// launch finds its instance, as upstream's kwok provider) or unique (a new name per launch,
    /// like a real cloud's instance ids). Not read by aws or kwok.
    #[arg(
        long,
        env = "FAKE_INSTANCE_NAMES",
        value_enum,
        value_name = "NAMING",
        default_value = "claim"
    )]
    pub fake_instance_names: FakeInstanceNames,
    /// A kubeconfig file. Default: as kubectl (KUBECONFIG, ~/.kube/config, then the in-cluster
    /// service account).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<String>,
    /// The EKS cluster name (tags and discovery).
    #[arg(long, env = "CLUSTER_NAME", default_value = "")]
    pub cluster_name: String,
    /// The EKS cluster endpoint.
    #[arg(long, env = "CLUSTER_ENDPOINT", default_value = "")]
    pub cluster_endpoint: String,
    /// The SQS queue of interruption events (spot interruptions, rebalance recommendations,
    /// scheduled maintenance, instance state changes). Empty: interruption handling is off.
    #[arg(long, env = "INTERRUPTION_QUEUE", default_value = "")]
    pub interruption_queue: String,
    /// How long the provisioner waits for more pending pods after the last one arrived.
    #[arg(long, env = "BATCH_IDLE_DURATION", value_parser = parse_duration, default_value = "1s")]
    pub batch_idle_duration: Duration,
    /// The longest a provisioning batch is held open.
    #[arg(long, env = "BATCH_MAX_DURATION", value_parser = parse_duration, default_value = "10s")]
    pub batch_max_duration: Duration,
    /// Feature gates, `Name=true|false` separated by commas, over upstream's defaults (gates
    /// not named keep them): NodeRepair, ReservedCapacity, SpotToSpotConsolidation,
    /// NodeOverlay, StaticCapacity, CapacityBuffer. An unknown name is an error.
    #[arg(
        long,
        env = "FEATURE_GATES",
        value_parser = parse_feature_gates,
        default_value = DEFAULT_FEATURE_GATES
    )]
    pub feature_gates: FeatureGates,
    /// Preferred affinities and ScheduleAnyway topology spreads: Respect (treated as
    /// constraints until relaxed one by one) or Ignore.
    #[arg(
        long,
        env = "PREFERENCE_POLICY",
        alias = "preferences-policy",
        default_value = "Respect",
        value_parser = parse_preference_policy
    )]
    pub preference_policy: PreferencePolicy,
    /// minValues: Strict (a NodeClaim that cannot meet them is not made) or BestEffort
    /// (minValues are lowered to what the instance types allow).
    #[arg(long, env = "MIN_VALUES_POLICY", default_value = "Strict", value_parser = parse_min_values_policy)]
    pub min_values_policy: MinValuesPolicy,
    /// The packing policy of every NodePool (karpenter-rs, not upstream): `upstream` or `cost`.
    /// Unset: each NodePool's `karpenter-rs.io/packing` annotation decides (absent: upstream).
    #[arg(long, env = "PACKING", value_parser = ["upstream", "cost"])]
    pub packing: Option<String>,
    /// Log level.
    #[arg(long, env = "LOG_LEVEL", value_enum, default_value = "info")]
    pub log_level: LogLevel,
    /// The smoothed rate of requests a second to the kube-apiserver (a client-side token
    /// bucket over every API call but the leader-election Lease's: lists, watches, writes).
    #[arg(long, env = "KUBE_CLIENT_QPS", default_value_t = 200, value_parser = parse_positive)]
    pub kube_client_qps: u32,
    /// The most requests the client may send at once before the QPS limit applies.
    #[arg(long, env = "KUBE_CLIENT_BURST", default_value_t = 300, value_parser = parse_positive)]
    pub kube_client_burst: u32,
    /// Leave out the gauges that describe the cluster object by object (pod state and
    /// latency, node and NodePool resources): on very large clusters they are most of the
    /// scrape.
    #[arg(
        long,
        env = "DISABLE_CLUSTER_STATE_OBSERVABILITY",
        default_value_t = false
    )]
    pub disable_cluster_state_observability: bool,
    /// Port of the Prometheus metrics endpoint (/metrics).
    #[arg(long, env = "METRICS_PORT", default_value_t = 8080)]
    pub metrics_port: u16,
    /// Port of the liveness (/healthz) and readiness (/readyz) probes.
    #[arg(long, env = "HEALTH_PROBE_PORT", default_value_t = 8081)]
    pub health_probe_port: u16,
    /// Address the metrics and probe servers bind.
    #[arg(long, env = "BIND_ADDRESS", default_value = "0.0.0.0")]
    pub bind_address: String,
    /// Run without a Lease (only for a single replica).
    #[arg(long, env = "DISABLE_LEADER_ELECTION", default_value_t = false)]
    pub disable_leader_election: bool,
    /// The name of the leader-election Lease.
    #[arg(
        long,
        env = "LEADER_ELECTION_NAME",
        default_value = "karpenter-leader-election"
    )]
    pub leader_election_name: String,
    /// The namespace of the leader-election Lease. Default: SYSTEM_NAMESPACE (the pod's own
    /// namespace in the manifests), else `karpenter`.
    #[arg(long, env = "LEADER_ELECTION_NAMESPACE")]
    pub leader_election_namespace: Option<String>,
    /// This replica's identity in the Lease. Default: POD_NAME (or the hostname) plus a random
    /// suffix.
    #[arg(long, env = "LEADER_ELECTION_IDENTITY")]
    pub leader_election_identity: Option<String>,
    /// How long a Lease is valid without renewal: how long followers wait before taking it
    /// over (client-go's lease duration).
    #[arg(long, env = "LEADER_ELECTION_LEASE_DURATION", value_parser = parse_duration, default_value = "15s")]
    pub lease_duration: Duration,
    /// How long the leader goes on leading without a successful renewal (client-go's renew
    /// deadline): it stops acting before the lease duration lets a follower take over.
    #[arg(long, env = "LEADER_ELECTION_RENEW_DEADLINE", value_parser = parse_duration, default_value = "10s")]
    pub lease_renew_deadline: Duration,
    /// How often the leader renews its Lease and followers try to take it (client-go's retry
    /// period).
    #[arg(long, env = "LEADER_ELECTION_RENEW_PERIOD", value_parser = parse_duration, default_value = "2s")]
    pub lease_renew_period: Duration,
}

/// The settings as a command of their own (`NAME [FLAGS]`), for [`ControllerArgs::parse_env`].
#[derive(clap::Parser)]
struct Standalone {
    #[command(flatten)]
    args: ControllerArgs,
}

impl ControllerArgs {
    /// The settings from this process's command line and environment, for a binary whose
    /// whole command line is the controller's flags (a custom provider's controller); on a
    /// bad flag or `--help` it prints clap's message and exits, as clap does.
    pub fn parse_env() -> ControllerArgs {
        <Standalone as clap::Parser>::parse().args
    }

    /// [`ControllerArgs::parse_env`] from `args` (the first is the program name), with
    /// clap's error instead of exiting.
    pub fn try_parse_from<I, T>(args: I) -> Result<ControllerArgs, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        <Standalone as clap::Parser>::try_parse_from(args).map(|s| s.args)
    }
}

/// `karpenter controller --help` epilogue: how to deploy.
pub const CONTROLLER_AFTER_HELP: &str = "\
Deploying:
  1. Install the CRDs:        karpenter crds | kubectl apply --server-side -f -
  2. Install RBAC and the Deployment from deploy/ in the source tree (namespace karpenter,
     service account karpenter); set CLUSTER_NAME, INTERRUPTION_QUEUE and the IAM role
     (docs/deploy-eks.md walks through IRSA / Pod Identity, the queue and the discovery tags).
  3. Apply a NodePool (and, on AWS, an EC2NodeClass) and watch NodeClaims appear for pending pods.

Without a cloud account: --cloud-provider fake launches no instances; it creates a Node object
per NodeClaim annotated kwok.x-k8s.io/node=fake, which kwok turns into a Ready node.
--cloud-provider kwok is upstream's kwok provider (NodePools reference a KWOKNodeClass; install
its CRD with `karpenter crds --kwok`), the one upstream's end-to-end suites run against.

The controller finds its cluster as kubectl does (--kubeconfig, KUBECONFIG, ~/.kube/config, then
the in-cluster service account), elects one leader on a coordination.k8s.io Lease, serves
Prometheus metrics on :METRICS_PORT/metrics and probes on :HEALTH_PROBE_PORT/healthz and /readyz,
logs JSON to standard output, and stops cleanly on SIGTERM.";

pub use karpenter_core::features::{DEFAULT_FEATURE_GATES, FeatureGates, Gate, SettingsError};

/// The gate states the controller refuses at start, and why: a gate that is on and does
/// nothing would be worse than a refusal.
pub const UNSUPPORTED_GATES: &[(Gate, bool, &str)] = &[
    (
        Gate::StaticCapacity,
        true,
        "this build does not implement StaticCapacity yet; leave it false",
    ),
    (
        Gate::CapacityBuffer,
        true,
        "this build does not implement CapacityBuffer yet; leave it false",
    ),
    (
        Gate::ReservedCapacity,
        false,
        "this build always schedules reserved offerings as upstream's default does; leave it true",
    ),
];

/// Parses `FEATURE_GATES` (`Name=true,Other=false` over upstream's defaults; unknown names are
/// errors): [`karpenter_core::features`].
pub fn parse_feature_gates(text: &str) -> Result<FeatureGates, SettingsError> {
    text.parse()
}

/// Parses `PREFERENCE_POLICY`: `Respect` or `Ignore`.
pub fn parse_preference_policy(text: &str) -> Result<PreferencePolicy, SettingsError> {
    text.parse()
}

/// Parses `MIN_VALUES_POLICY`: `Strict` or `BestEffort`.
pub fn parse_min_values_policy(text: &str) -> Result<MinValuesPolicy, SettingsError> {
    text.parse()
}

/// Parses a whole number of at least 1 (`KUBE_CLIENT_QPS`, `KUBE_CLIENT_BURST`).
pub fn parse_positive(text: &str) -> Result<u32, String> {
    match text.trim().parse::<u32>() {
        Ok(0) => Err("must be at least 1".to_string()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{text:?} is not a whole number of at least 1")),
    }
}

/// Parses a Go duration as upstream's flags take them: `1s`, `500ms`, `1m30s`, `2h`, `0`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if t == "0" {
        return Ok(Duration::ZERO);
    }
    if t.is_empty() {
        return Err("empty duration".to_string());
    }
    let bad = || format!("{text:?} is not a duration such as 500ms, 10s, 1m30s or 2h");
    let mut total = Duration::ZERO;
    let mut rest = t;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        if digits == 0 {
            return Err(bad());
        }
        let number: f64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        rest = &rest[unit_len..];
        total += Duration::try_from_secs_f64(number * scale).map_err(|_| bad())?;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_like_go() {
        assert_eq!(parse_duration("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("10").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("3d").is_err());
        assert!(parse_duration("").is_err());
    }

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: ControllerArgs,
    }

    #[test]
    fn kube_client_rate_limits_default_as_upstream_and_reject_zero() {
        use clap::Parser;
        let args = Cli::try_parse_from(["karpenter"]).unwrap().args;
        assert_eq!((args.kube_client_qps, args.kube_client_burst), (200, 300));
        assert!(!args.disable_cluster_state_observability);
        let args = Cli::try_parse_from([
            "karpenter",
            "--kube-client-qps",
            "50",
            "--kube-client-burst",
            "75",
            "--disable-cluster-state-observability",
        ])
        .unwrap()
        .args;
        assert_eq!((args.kube_client_qps, args.kube_client_burst), (50, 75));
        assert!(args.disable_cluster_state_observability);
        for bad in ["0", "-5", "fast", "1.5"] {
            let e =
                Cli::try_parse_from(["karpenter".to_string(), format!("--kube-client-qps={bad}")])
                    .err()
                    .unwrap_or_else(|| panic!("{bad} accepted"))
                    .to_string();
            assert!(e.contains("--kube-client-qps"), "{e}");
        }
        let e = Cli::try_parse_from(["karpenter", "--kube-client-burst", "0"])
            .err()
            .expect("a zero burst is rejected")
            .to_string();
        assert!(e.contains("at least 1"), "{e}");
    }

    #[test]
    fn feature_gates_parse_over_upstreams_defaults() {
        let g = parse_feature_gates("NodeRepair=true, SpotToSpotConsolidation=false").unwrap();
        assert!(g.enabled(Gate::NodeRepair));
        assert!(!g.enabled(Gate::SpotToSpotConsolidation));
        assert!(
            g.enabled(Gate::ReservedCapacity),
            "a gate not named keeps its default"
        );
        assert!(parse_feature_gates("NodeRepair").is_err());
        assert!(parse_feature_gates("NodeRepair=yes").is_err());
        assert_eq!(parse_feature_gates(""), Ok(FeatureGates::default()));
    }

    #[test]
    fn unknown_and_unimplemented_gates_are_refused() {
        let defaults = ControllerArgs::try_parse_from(["karpenter"])
            .unwrap()
            .feature_gates;
        assert_eq!(
            defaults.require_supported(UNSUPPORTED_GATES),
            Ok(()),
            "upstream's defaults pass"
        );
        assert!(defaults.enabled(Gate::ReservedCapacity));
        let e = ControllerArgs::try_parse_from(["karpenter", "--feature-gates", "NodeRepiar=true"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown feature gate \"NodeRepiar\""), "{e}");
        for bad in [
            "StaticCapacity=true",
            "CapacityBuffer=true",
            "ReservedCapacity=false",
        ] {
            let e = parse_feature_gates(bad)
                .unwrap()
                .require_supported(UNSUPPORTED_GATES)
                .unwrap_err()
                .to_string();
            assert!(e.starts_with(bad), "{e}");
        }
        assert_eq!(
            parse_feature_gates("SpotToSpotConsolidation=true,NodeRepair=true")
                .unwrap()
                .require_supported(UNSUPPORTED_GATES),
            Ok(())
        );
    }

    #[test]
    fn policies_are_refused_unless_upstreams_values() {
        for (flag, bad) in [
            ("--preference-policy", "ignore"),
            ("--min-values-policy", "Lax"),
        ] {
            let e = ControllerArgs::try_parse_from(["karpenter", flag, bad])
                .unwrap_err()
                .to_string();
            assert!(e.contains(bad) && e.contains(flag), "{e}");
        }
    }
}
