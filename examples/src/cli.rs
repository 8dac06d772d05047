//! The command line: `karpenter plan ...` parsed with clap, run, and printed. [`run`] does all
//! the work with its standard streams passed in, so tests drive it without a process.

use std::ffi::OsString;
use std::io::{IsTerminal, Read, Write};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use karpenter_core::model::Timestamp;

use karpenter_controller::ControllerArgs;
use karpenter_fake::sim::chaos::FaultRates;
use karpenter_plan::catalog::CatalogSpec;
use karpenter_plan::manifests::{Input, read_inputs};
use karpenter_plan::output;
use karpenter_plan::plan::{PlanError, PlanOptions, plan};
use karpenter_plan::settings::Settings;
use karpenter_plan::simulate::SimulateOptions;
use karpenter_plan::warnings::RULES;

/// `karpenter`: Karpenter node autoscaling.
#[derive(Debug, Parser)]
#[command(name = "karpenter", version, about = "Karpenter node autoscaling")]
pub struct Cli {
    /// The subcommand.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Which nodes would Karpenter launch for these manifests, and what would they cost?
    Plan(PlanArgs),
    /// What would these NodePools cost over a day of this workload, with and without
    /// consolidation? (The operator loops over a simulated cluster.)
    Simulate(SimulateArgs),
    /// Print the CustomResourceDefinitions (NodePool, NodeClaim, NodeOverlay, EC2NodeClass) as multi-document
    /// YAML.
    Crds(CrdsArgs),
    /// Rewrite v1beta1 NodePools and EC2NodeClasses as v1 (upstream's v1 migration), printing
    /// the result on standard output and every change on standard error.
    Migrate(MigrateArgs),
    /// Run the node autoscaler against a cluster (see --help for how to deploy it).
    Controller(Box<ControllerArgs>),
}

/// `karpenter crds` arguments.
#[derive(Debug, Args)]
pub struct CrdsArgs {
    /// Also print the KWOKNodeClass CRD (karpenter.kwok.sh), the node class of
    /// `karpenter controller --cloud-provider kwok`.
    #[arg(long)]
    pub kwok: bool,
}

/// `karpenter migrate` arguments.
#[derive(Debug, Args)]
#[command(after_help = MIGRATE_HELP)]
pub struct MigrateArgs {
    /// A manifest file, a directory (read recursively: *.yaml, *.yml, *.json) or - for standard
    /// input. Repeatable. Give the EC2NodeClasses with the NodePools: a NodePool's kubelet moves
    /// to its class.
    #[arg(short = 'f', long = "filename", value_name = "PATH", required = true)]
    pub files: Vec<String>,
}

const MIGRATE_HELP: &str = "Writes every input object to standard output as multi-document \
YAML: v1beta1 NodePools and EC2NodeClasses rewritten as karpenter.sh/v1 and karpenter.k8s.aws/v1 \
(consolidationPolicy WhenUnderutilized -> WhenEmptyOrUnderutilized, expireAfter moved to the \
template, the kubelet moved to the EC2NodeClass, nodeClassRef's group, amiFamily -> an alias \
amiSelectorTerm, ...), v1 objects and other kinds unchanged, v1beta1 NodeClaims dropped. Each \
change is explained on standard error. NodePools that share an EC2NodeClass but not their \
kubelet get a class each (<class>-<nodepool>).

Exit status: 0 when everything was migrated and the result is valid v1; 2 when something cannot \
be carried over (each message names the file, the object and the field; nothing is written to \
standard output); 1 for an internal error.";

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A table for people.
    Table,
    /// JSON (the contract's structure).
    Json,
    /// YAML (same structure as JSON).
    Yaml,
}

/// `karpenter plan` arguments.
#[derive(Debug, Args)]
#[command(after_help = rules_help())]
pub struct PlanArgs {
    /// A manifest file, a directory (read recursively: *.yaml, *.yml, *.json) or - for standard
    /// input. Repeatable. Optional with --from-cluster.
    #[arg(
        short = 'f',
        long = "filename",
        value_name = "PATH",
        required_unless_present_any = ["from_cluster", "kubeconfig"]
    )]
    pub files: Vec<String>,
    /// Read the live cluster (found as kubectl finds it: KUBECONFIG, ~/.kube/config, then
    /// in-cluster) in addition to any -f files: NodePools, NodeClaims, EC2NodeClasses, Nodes,
    /// pods, DaemonSets, PDBs and volumes.
    #[arg(long)]
    pub from_cluster: bool,
    /// The kubeconfig of the cluster to read (implies --from-cluster).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<String>,
    /// Where instance types come from: aws (embedded us-east-1 catalog), fake:N, or a catalog
    /// file.
    #[arg(long, value_name = "SPEC", default_value = "aws")]
    pub catalog: String,
    /// The spot price estimate of the aws catalog, as a fraction of the on-demand price
    /// (default 0.35: spot = 0.35 x on-demand; see the help's catalog section).
    #[arg(long, value_name = "FACTOR")]
    pub spot_price_factor: Option<f64>,
    /// Also plan disruption (consolidation, drift, expiry) of the existing cluster.
    #[arg(long)]
    pub disruption: bool,
    /// The time the disruption planner uses (RFC 3339, e.g. 2026-06-10T00:00:00Z); default:
    /// now. Pin it for answers that do not change from day to day.
    #[arg(long, value_name = "RFC3339")]
    pub now: Option<String>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
    pub output: Format,
    /// For every pod left out, show every NodePool and why it could not take the pod.
    #[arg(long)]
    pub explain: bool,
    /// Silence the warnings of RULE. Repeatable.
    #[arg(long = "allow", value_name = "RULE")]
    pub allow: Vec<String>,
    /// The packing policy of every NodePool: upstream (upstream Karpenter's packing) or cost
    /// (the cheapest plan found that honours the same constraints). Default: each NodePool's
    /// karpenter-rs.io/packing annotation, else upstream. Given either way, the summary shows
    /// both policies' costs.
    #[arg(long, value_name = "POLICY")]
    pub packing: Option<String>,
    /// Feature gates, as the controller's FEATURE_GATES: Name=true|false separated by commas,
    /// over upstream's defaults (NodeRepair=false, ReservedCapacity=true,
    /// SpotToSpotConsolidation=false, NodeOverlay=false, StaticCapacity=false,
    /// CapacityBuffer=false). NodeOverlay=true applies the input's NodeOverlays (karpenter.sh/v1alpha1)
    /// to the instance types; SpotToSpotConsolidation=true lets consolidation replace a spot
    /// node by a cheaper spot one. An unknown gate, StaticCapacity=true, CapacityBuffer=true and
    /// ReservedCapacity=false are refused.
    #[arg(long, value_name = "GATES")]
    pub feature_gates: Option<String>,
    /// Preferred node and pod affinities and ScheduleAnyway topology spreads, as the
    /// controller's PREFERENCE_POLICY: Respect (constraints until relaxed one by one; the
    /// default) or Ignore.
    #[arg(long, value_name = "POLICY")]
    pub preference_policy: Option<String>,
    /// minValues, as the controller's MIN_VALUES_POLICY: Strict (a NodeClaim whose instance
    /// types cannot meet them is not made; the default) or BestEffort (they are lowered to what
    /// the instance types allow).
    #[arg(long, value_name = "POLICY")]
    pub min_values_policy: Option<String>,
}

/// `karpenter simulate` arguments.
#[derive(Debug, Args)]
#[command(after_help = SIMULATE_HELP)]
pub struct SimulateArgs {
    /// A manifest file, a directory (read recursively: *.yaml, *.yml, *.json) or - for standard
    /// input, read as `karpenter plan -f` reads it: the NodePools (and EC2NodeClasses), and
    /// optionally a cluster dump whose pods are the starting workload. Repeatable.
    #[arg(short = 'f', long = "filename", value_name = "PATH", required = true)]
    pub files: Vec<String>,
    /// The workload over time (YAML; format in docs/simulate.md).
    #[arg(long, value_name = "FILE")]
    pub workload: String,
    /// Virtual time to simulate (a Go duration: 24h, 90m, 2h30m).
    #[arg(long, value_name = "DURATION", default_value = "24h")]
    pub duration: String,
    /// Virtual time per step: workload changes and faults happen at step boundaries, and the
    /// cluster is sampled at the end of each.
    #[arg(long, value_name = "DURATION", default_value = "1m")]
    pub step: String,
    /// Seed of the faults and spot interruptions (same inputs and seed: the same output).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,
    /// Injected faults per step: none, default, or name=rate,... (ice, throttle, timeout,
    /// partial-fleet, lost-launch, node-delete, node-remove, interrupt, crash).
    #[arg(long, value_name = "SPEC", default_value = "none")]
    pub faults: String,
    /// Output format: table or json.
    #[arg(
        short = 'o',
        long = "output",
        value_name = "FORMAT",
        default_value = "table"
    )]
    pub output: String,
    /// Also write the cost-over-time chart as SVG to FILE.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<String>,
    /// Where instance types come from: aws (embedded us-east-1 catalog), fake:N, or a catalog
    /// file (as for karpenter plan).
    #[arg(long, value_name = "SPEC", default_value = "aws")]
    pub catalog: String,
    /// The spot price estimate of the aws catalog, as a fraction of the on-demand price.
    #[arg(long, value_name = "FACTOR")]
    pub spot_price_factor: Option<f64>,
    /// The packing policy of every NodePool: upstream or cost (default: each NodePool's
    /// karpenter-rs.io/packing annotation, else upstream).
    #[arg(long, value_name = "POLICY")]
    pub packing: Option<String>,
    /// Feature gates, as the controller's FEATURE_GATES: Name=true|false separated by commas,
    /// over upstream's defaults (NodeRepair=false, ReservedCapacity=true,
    /// SpotToSpotConsolidation=false, NodeOverlay=false, StaticCapacity=false,
    /// CapacityBuffer=false). NodeOverlay=true applies the input's NodeOverlays (karpenter.sh/v1alpha1)
    /// to the instance types; SpotToSpotConsolidation=true lets consolidation replace a spot
    /// node by a cheaper spot one. An unknown gate, StaticCapacity=true, CapacityBuffer=true and
    /// ReservedCapacity=false are refused.
    #[arg(long, value_name = "GATES")]
    pub feature_gates: Option<String>,
    /// Preferred node and pod affinities and ScheduleAnyway topology spreads, as the
    /// controller's PREFERENCE_POLICY: Respect (constraints until relaxed one by one; the
    /// default) or Ignore.
    #[arg(long, value_name = "POLICY")]
    pub preference_policy: Option<String>,
    /// minValues, as the controller's MIN_VALUES_POLICY: Strict (a NodeClaim whose instance
    /// types cannot meet them is not made; the default) or BestEffort (they are lowered to what
    /// the instance types allow).
    #[arg(long, value_name = "POLICY")]
    pub min_values_policy: Option<String>,
}

const SIMULATE_HELP: &str = "Runs Karpenter's own operator loops (provisioning, disruption, \
termination, garbage collection, interruption handling) against a simulated cluster with a \
virtual clock, twice: as the NodePools say, and with consolidateAfter: Never (the baseline). \
Reports cost over time, nodes launched and removed by reason, pod disruptions and the saving.

Exit status: 0 when the simulation ran; 2 for invalid input or usage (the message names the \
file, the object and the field); 1 for an internal error.

The JSON output is a stable contract: docs/simulate.md in the repository.";

fn rules_help() -> String {
    let s = String::from(
        "Exit status: 0 when planning ran (even with unschedulable pods); 2 for invalid input or \
         usage (the message names the file, the document, the object and the field); 1 for an \
         internal error.

Catalogs (--catalog):
  aws      the embedded us-east-1 catalog: real instance types, zones and on-demand prices;
           spot prices are estimated as --spot-price-factor x on-demand (default FACTOR)
  fake:N   upstream Karpenter's N generated test instance types (fake.InstanceTypes(N))
  PATH     a catalog file (YAML or JSON):
             instanceTypes:
               - name: m5.xlarge
                 capacity: {cpu: \"4\", memory: 16Gi, pods: \"58\"}
                 overhead: {kubeReserved: {cpu: 80m}, evictionThreshold: {memory: 100Mi}}
                 labels: {kubernetes.io/arch: amd64}
                 offerings:
                   - {zone: us-east-1a, capacityType: on-demand, price: 0.192}
                   - {zone: us-east-1a, capacityType: spot, price: 0.071, available: false}

Workloads: a Deployment, ReplicaSet, StatefulSet or Job becomes pending pods only for the
replicas that have no pod in the input (ownerReferences), so a `kubectl get -o yaml` dump
counts each pod once and a directory of manifests expands every replica.

The JSON / YAML output is a stable contract: docs/plan-contract.md in the repository.

",
    );
    let mut s = s.replace(
        "FACTOR",
        &karpenter_aws::catalog::DEFAULT_SPOT_PRICE_FACTOR.to_string(),
    );
    s.push_str("Warning rules (for --allow):\n");
    for (rule, what) in RULES {
        s.push_str(&format!("  {rule:34} {what}\n"));
    }
    s
}

/// A spinner on standard error that appears only when planning takes more than a second and
/// standard error is a terminal.
struct Progress {
    bar: ProgressBar,
    done: Option<mpsc::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Progress {
    fn start(enabled: bool) -> Progress {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
            bar.set_style(style);
        }
        if !enabled {
            return Progress {
                bar,
                done: None,
                thread: None,
            };
        }
        let (tx, rx) = mpsc::channel::<()>();
        let shown = bar.clone();
        let thread = thread::spawn(move || {
            if rx.recv_timeout(Duration::from_secs(1)).is_err() {
                shown.set_draw_target(ProgressDrawTarget::stderr());
                shown.enable_steady_tick(Duration::from_millis(100));
                let _ = rx.recv();
            }
        });
        Progress {
            bar,
            done: Some(tx),
            thread: Some(thread),
        }
    }

    fn phase(&self, message: &str) {
        self.bar.set_message(message.to_string());
    }

    fn finish(mut self) {
        if let Some(tx) = self.done.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.bar.finish_and_clear();
    }
}

/// Runs the command line `args` (including the program name). Returns the exit status: 0 when
/// planning ran, 2 for invalid input or usage, 1 for internal errors.
pub fn run(
    args: impl IntoIterator<Item = impl Into<OsString> + Clone>,
    stdin: &mut dyn Read,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
    now: Timestamp,
    progress_on_tty: bool,
) -> i32 {
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let text = e.render().to_string();
            let _ = if e.use_stderr() {
                write!(stderr, "{text}")
            } else {
                write!(stdout, "{text}")
            };
            return e.exit_code();
        }
    };
    match cli.command {
        Command::Plan(args) => run_plan(&args, stdin, stdout, stderr, now, progress_on_tty),
        Command::Simulate(args) => run_simulate(&args, stdin, stdout, stderr, progress_on_tty),
        Command::Crds(args) => run_crds(&args, stdout, stderr),
        Command::Migrate(args) => run_migrate(&args, stdin, stdout, stderr),
        Command::Controller(args) => match crate::controller::run_blocking(*args) {
            Ok(()) => 0,
            Err(e) => {
                let _ = writeln!(stderr, "error: {e}");
                e.exit_code()
            }
        },
    }
}

fn run_migrate(
    args: &MigrateArgs,
    stdin: &mut dyn Read,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> i32 {
    let inputs: Vec<Input> = args.files.iter().map(|f| Input::parse(f)).collect();
    let docs = match read_inputs(&inputs, stdin) {
        Ok(d) => d,
        Err(e) => {
            let _ = writeln!(stderr, "error: {e}");
            return 2;
        }
    };
    let migration = match karpenter_plan::migrate::migrate(&docs) {
        Ok(m) => m,
        Err(e) => {
            for line in e.to_string().lines() {
                let _ = writeln!(stderr, "error: {line}");
            }
            return e.exit_code();
        }
    };
    for c in &migration.changes {
        let _ = writeln!(stderr, "{c}");
    }
    let text = match migration.to_yaml() {
        Ok(t) => t,
        Err(e) => {
            let _ = writeln!(stderr, "error: {e}");
            return e.exit_code();
        }
    };
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => 0,
        Err(e) => {
            let _ = writeln!(stderr, "error: writing the migrated manifests: {e}");
            1
        }
    }
}

fn run_crds(args: &CrdsArgs, stdout: &mut dyn Write, stderr: &mut dyn Write) -> i32 {
    let text = karpenter_controller::crds::with_kwok(args.kwok)
        .and_then(|crds| karpenter_controller::crds::to_yaml(&crds));
    match text {
        Ok(text) => match stdout
            .write_all(text.as_bytes())
            .and_then(|()| stdout.flush())
        {
            Ok(()) => 0,
            Err(e) => {
                let _ = writeln!(stderr, "error: writing the CRDs: {e}");
                1
            }
        },
        Err(e) => {
            let _ = writeln!(stderr, "error: {e}");
            1
        }
    }
}

/// The live cluster's documents for `--from-cluster`: the cluster found as kubectl finds it
/// (or through `kubeconfig`), read on a runtime of its own.
fn read_cluster(
    kubeconfig: Option<&str>,
) -> Result<Vec<karpenter_plan::manifests::Document>, PlanError> {
    let input = |e: String| PlanError::Input(format!("--from-cluster: {e}"));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| input(format!("starting the async runtime: {e}")))?;
    rt.block_on(async {
        let client = karpenter_controller::client(kubeconfig)
            .await
            .map_err(|e| input(e.to_string()))?;
        karpenter_plan::live::read_cluster(&client)
            .await
            .map_err(|e| input(e.to_string()))
    })
}

fn run_plan(
    args: &PlanArgs,
    stdin: &mut dyn Read,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
    now: Timestamp,
    progress_on_tty: bool,
) -> i32 {
    let fail = |stderr: &mut dyn Write, e: PlanError| {
        let _ = writeln!(stderr, "error: {e}");
        e.exit_code()
    };
    let catalog: CatalogSpec = match args.catalog.parse() {
        Ok(c) => c,
        Err(e) => return fail(stderr, PlanError::Input(format!("--catalog: {e}"))),
    };
    let now = match &args.now {
        None => now,
        Some(text) => match text.parse::<Timestamp>() {
            Ok(t) => t,
            Err(e) => {
                return fail(
                    stderr,
                    PlanError::Input(format!("--now {text:?}: not an RFC 3339 time: {e}")),
                );
            }
        },
    };
    let packing = match args.packing.as_deref().map(str::parse) {
        None => None,
        Some(Ok(p)) => Some(p),
        Some(Err(e)) => return fail(stderr, PlanError::Input(format!("--packing: {e}"))),
    };
    let settings = match Settings::parse(
        args.feature_gates.as_deref(),
        args.preference_policy.as_deref(),
        args.min_values_policy.as_deref(),
    ) {
        Ok(s) => s,
        Err(e) => return fail(stderr, e),
    };
    let opts = PlanOptions {
        settings,
        packing,
        catalog,
        spot_price_factor: args.spot_price_factor,
        disruption: args.disruption,
        now,
        explain: args.explain,
        allow: args.allow.clone(),
    };
    let inputs: Vec<Input> = args.files.iter().map(|f| Input::parse(f)).collect();

    let progress = Progress::start(progress_on_tty && std::io::stderr().is_terminal());
    progress.phase("reading input");
    let from_cluster = args.from_cluster || args.kubeconfig.is_some();
    let result = read_inputs(&inputs, stdin)
        .map_err(PlanError::from)
        .and_then(|mut docs| {
            if from_cluster {
                progress.phase("reading the cluster");
                docs.extend(read_cluster(args.kubeconfig.as_deref())?);
            }
            plan(&docs, &opts, &mut |p| progress.phase(p))
        });
    progress.finish();

    let result = match result {
        Ok(r) => r,
        Err(e) => return fail(stderr, e),
    };
    for n in &result.notices {
        let _ = writeln!(stderr, "warning: {n}");
    }
    let text = match args.output {
        Format::Table => Ok(output::to_table(&result.output)),
        Format::Json => output::to_json(&result.output),
        Format::Yaml => output::to_yaml(&result.output),
    };
    match text {
        Ok(t) => {
            if let Err(e) = stdout.write_all(t.as_bytes()).and_then(|()| stdout.flush()) {
                let _ = writeln!(stderr, "error: writing the plan: {e}");
                return 1;
            }
            0
        }
        Err(e) => fail(stderr, PlanError::Internal(e.to_string())),
    }
}

fn parse_duration(flag: &str, text: &str) -> Result<jiff::SignedDuration, PlanError> {
    let d = karpenter_core::api::Duration::parse(text)
        .map_err(|e| PlanError::Input(format!("{flag} {text:?}: {e}")))?
        .as_signed_duration();
    if !d.is_positive() {
        return Err(PlanError::Input(format!(
            "{flag} {text:?}: must be longer than zero"
        )));
    }
    Ok(d)
}

fn simulate_options(args: &SimulateArgs) -> Result<SimulateOptions, PlanError> {
    let catalog: CatalogSpec = args
        .catalog
        .parse()
        .map_err(|e| PlanError::Input(format!("--catalog: {e}")))?;
    let duration = parse_duration("--duration", &args.duration)?;
    let step = parse_duration("--step", &args.step)?;
    if step > duration {
        return Err(PlanError::Input(format!(
            "--step {}: longer than --duration {}",
            args.step, args.duration
        )));
    }
    let faults = FaultRates::parse(&args.faults)
        .map_err(|e| PlanError::Input(format!("--faults {:?}: {e}", args.faults)))?;
    let packing = match args.packing.as_deref().map(str::parse) {
        None => None,
        Some(Ok(p)) => Some(p),
        Some(Err(e)) => return Err(PlanError::Input(format!("--packing: {e}"))),
    };
    if !matches!(args.output.as_str(), "table" | "json") {
        return Err(PlanError::Input(format!(
            "--output {:?}: karpenter simulate prints table or json",
            args.output
        )));
    }
    let settings = Settings::parse(
        args.feature_gates.as_deref(),
        args.preference_policy.as_deref(),
        args.min_values_policy.as_deref(),
    )?;
    Ok(SimulateOptions {
        settings,
        catalog,
        spot_price_factor: args.spot_price_factor,
        duration,
        step,
        seed: args.seed,
        faults,
        packing,
    })
}

fn run_simulate(
    args: &SimulateArgs,
    stdin: &mut dyn Read,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
    progress_on_tty: bool,
) -> i32 {
    let fail = |stderr: &mut dyn Write, e: PlanError| {
        let _ = writeln!(stderr, "error: {e}");
        e.exit_code()
    };
    let opts = match simulate_options(args) {
        Ok(o) => o,
        Err(e) => return fail(stderr, e),
    };
    let workload = match std::fs::read_to_string(&args.workload) {
        Ok(text) => match karpenter_plan::simulate::workload::parse(&args.workload, &text) {
            Ok(w) => w,
            Err(e) => return fail(stderr, e.into()),
        },
        Err(e) => {
            return fail(
                stderr,
                PlanError::Input(format!("--workload {}: {e}", args.workload)),
            );
        }
    };
    let inputs: Vec<Input> = args.files.iter().map(|f| Input::parse(f)).collect();
    let prepared = match read_inputs(&inputs, stdin)
        .map_err(PlanError::from)
        .and_then(|docs| karpenter_plan::simulate::prepare(&docs, &workload, &args.workload, &opts))
    {
        Ok(p) => p,
        Err(e) => return fail(stderr, e),
    };
    for n in &prepared.notices {
        let _ = writeln!(stderr, "warning: {n}");
    }
    let bar = if progress_on_tty && std::io::stderr().is_terminal() {
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template(
            "{msg} [{bar:40}] {percent}% ({elapsed}, about {eta} left)",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message("simulating");
        Some(bar)
    } else {
        None
    };
    let result = karpenter_plan::simulate::simulate(&prepared, &opts, &mut |done, total| {
        if let Some(b) = &bar {
            b.set_length(total as u64);
            b.set_position(done as u64);
            b.set_message(if done * 2 <= total {
                "simulating (consolidated)"
            } else {
                "simulating (baseline)"
            });
        }
    });
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let sim = match result {
        Ok(s) => s,
        Err(e) => return fail(stderr, e),
    };
    if let Some(path) = &args.svg {
        let svg = karpenter_plan::simulate::report::to_svg(&sim);
        if let Err(e) = std::fs::write(path, svg) {
            return fail(stderr, PlanError::Input(format!("--svg {path}: {e}")));
        }
    }
    let text = if args.output == "json" {
        match karpenter_plan::simulate::report::to_json(&sim) {
            Ok(t) => t,
            Err(e) => return fail(stderr, PlanError::Internal(e.to_string())),
        }
    } else {
        karpenter_plan::simulate::report::to_table(&sim)
    };
    if let Err(e) = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        let _ = writeln!(stderr, "error: writing the report: {e}");
        return 1;
    }
    0
}
