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

use crate::catalog::CatalogSpec;
#[cfg(feature = "controller")]
use crate::controller::settings::ControllerArgs;
use crate::manifests::{Input, read_inputs};
use crate::output;
use crate::plan::{PlanError, PlanOptions, plan};
use crate::warnings::RULES;

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
    /// Print the CustomResourceDefinitions (NodePool, NodeClaim, EC2NodeClass) as multi-document
    /// YAML.
    Crds,
    /// Run the node autoscaler against a cluster (see --help for how to deploy it).
    #[cfg(feature = "controller")]
    Controller(Box<ControllerArgs>),
}

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
}

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
        Command::Crds => run_crds(stdout, stderr),
        #[cfg(feature = "controller")]
        Command::Controller(args) => match crate::controller::run_blocking(*args) {
            Ok(()) => 0,
            Err(e) => {
                let _ = writeln!(stderr, "error: {e}");
                e.exit_code()
            }
        },
    }
}

#[cfg(not(feature = "controller"))]
fn run_crds(_stdout: &mut dyn Write, stderr: &mut dyn Write) -> i32 {
    let _ = writeln!(stderr, "error: {WITHOUT_CONTROLLER}");
    2
}

/// What the cluster-facing commands say when the binary was built without them.
#[cfg(not(feature = "controller"))]
const WITHOUT_CONTROLLER: &str = "this karpenter binary was built without the `controller` \
    feature (cargo build -p karpenter-cli with default features enables it)";

#[cfg(feature = "controller")]
fn run_crds(stdout: &mut dyn Write, stderr: &mut dyn Write) -> i32 {
    match crate::crds::to_yaml(&crate::crds::all()) {
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

/// The live cluster's documents for `--from-cluster`.
#[cfg(feature = "controller")]
fn read_cluster(kubeconfig: Option<&str>) -> Result<Vec<crate::manifests::Document>, PlanError> {
    crate::live::read_cluster_blocking(kubeconfig)
        .map_err(|e| PlanError::Input(format!("--from-cluster: {e}")))
}

#[cfg(not(feature = "controller"))]
fn read_cluster(_: Option<&str>) -> Result<Vec<crate::manifests::Document>, PlanError> {
    Err(PlanError::Input(format!(
        "--from-cluster: {WITHOUT_CONTROLLER}"
    )))
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
    let opts = PlanOptions {
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
