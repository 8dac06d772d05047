//! The output of `karpenter simulate`: the JSON document (a stable contract, keys in
//! `docs/simulate.md`), the table for people and the SVG chart.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use comfy_table::{Cell, CellAlignment, ContentArrangement, Table, presets};
use jiff::SignedDuration;
use karpenter_fake::sim::scripted::{Sample, ScriptReport, instant};
use serde::Serialize;

use super::Simulation;
use crate::catalog::CatalogInfo;

/// The `apiVersion` of the JSON document.
pub const API_VERSION: &str = "karpenter-rs.io/simulate/v1";

/// The JSON document.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SimulateOutput {
    /// [`API_VERSION`].
    pub api_version: &'static str,
    /// The catalog.
    pub catalog: CatalogInfo,
    /// What was simulated.
    pub settings: Settings,
    /// The NodePools simulated.
    pub node_pools: Vec<String>,
    /// The run as the NodePools say.
    pub consolidated: RunOutput,
    /// The same run with `consolidateAfter: Never`.
    pub baseline: RunOutput,
    /// What consolidation saved.
    pub saving: Saving,
}

/// The run's settings.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Settings {
    /// `--duration`, as a Go duration.
    pub duration: String,
    /// `--step`.
    pub step: String,
    /// `--seed`.
    pub seed: u64,
    /// `--faults`, as `FaultRates` prints it (`none`, or `name=rate,...`).
    pub faults: String,
    /// `--packing`, when given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub packing: Option<String>,
    /// The virtual clock's start (RFC 3339).
    pub start: String,
    /// Spot interruptions per spot node per hour.
    pub spot_interruptions_per_node_hour: f64,
    /// Minutes between two `rows`.
    pub row_minutes: i64,
}

/// One run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunOutput {
    /// Total cost in dollars.
    pub cost: f64,
    /// Average nodes over the steps.
    pub average_nodes: f64,
    /// The most nodes at once.
    pub peak_nodes: usize,
    /// Instances launched.
    pub nodes_launched: usize,
    /// NodeClaims disrupted, by reason (`empty`, `underutilized`, `drifted`, `expired`,
    /// `spot_interrupted`, ...).
    pub nodes_removed: BTreeMap<String, usize>,
    /// Instances terminated.
    pub nodes_terminated: usize,
    /// Pods on disrupted nodes.
    pub pods_disrupted: usize,
    /// Pods evicted.
    pub evictions: usize,
    /// Spot interruption messages delivered.
    pub spot_interruptions: usize,
    /// Injected faults, by name.
    pub faults: BTreeMap<String, usize>,
    /// Controller restarts (injected crashes).
    pub restarts: usize,
    /// The most pods pending at the end of a step.
    pub peak_pending_pods: usize,
    /// The cluster every `settings.rowMinutes` (the table's rows).
    pub rows: Vec<Row>,
    /// The cluster at the end of every step.
    pub timeline: Vec<Row>,
}

/// The cluster at an instant.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    /// Minutes since the start.
    pub minute: i64,
    /// The instant (RFC 3339).
    pub time: String,
    /// Nodes.
    pub nodes: usize,
    /// Price per hour of the running instances.
    pub cost_per_hour: f64,
    /// Cost so far.
    pub cumulative_cost: f64,
    /// Pods pending.
    pub pending_pods: usize,
    /// Pods bound to a node.
    pub running_pods: usize,
}

/// The saving of consolidation over the baseline.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Saving {
    /// Baseline cost minus consolidated cost, in dollars.
    pub cost: f64,
    /// The same as a percentage of the baseline cost (0 when the baseline cost is 0).
    pub percent: f64,
}

fn round(x: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    let r = (x * f).round() / f;
    if r == 0.0 { 0.0 } else { r }
}

/// Steps between table rows: an hour's worth of steps, doubled until there are at most 48
/// rows, and a twelfth of the run when that gives fewer than four rows.
pub fn row_steps(sim: &Simulation) -> usize {
    let steps = sim.consolidated.samples.len().max(1);
    let step_secs = sim.options.step.as_secs().max(1);
    let mut every = usize::try_from((3600 / step_secs).max(1)).unwrap_or(1);
    while steps / every > 48 {
        every *= 2;
    }
    if steps / every < 4 {
        every = (steps / 12).max(1);
    }
    every
}

fn row(start: karpenter_core::model::Timestamp, s: &Sample) -> Row {
    Row {
        minute: s.at.as_secs() / 60,
        time: instant(start, s.at).to_string(),
        nodes: s.nodes,
        cost_per_hour: round(s.cost_per_hour, 4),
        cumulative_cost: round(s.cumulative_cost, 4),
        pending_pods: s.pending_pods,
        running_pods: s.running_pods,
    }
}

fn picked(samples: &[Sample], every: usize) -> Vec<&Sample> {
    let mut out: Vec<&Sample> = samples.iter().skip(every - 1).step_by(every).collect();
    if let Some(last) = samples.last()
        && out.last().is_none_or(|l| l.at != last.at)
    {
        out.push(last);
    }
    out
}

fn run_output(sim: &Simulation, r: &ScriptReport, every: usize) -> RunOutput {
    let n = r.samples.len().max(1) as f64;
    RunOutput {
        cost: round(r.cost, 4),
        average_nodes: round(r.samples.iter().map(|s| s.nodes as f64).sum::<f64>() / n, 2),
        peak_nodes: r.peak_nodes,
        nodes_launched: r.launched,
        nodes_removed: r.removed.clone(),
        nodes_terminated: r.terminated,
        pods_disrupted: r.pods_disrupted,
        evictions: r.evictions,
        spot_interruptions: r.spot_interruptions,
        faults: r.faults.clone(),
        restarts: r.restarts,
        peak_pending_pods: r.samples.iter().map(|s| s.pending_pods).max().unwrap_or(0),
        rows: picked(&r.samples, every)
            .into_iter()
            .map(|s| row(sim.start, s))
            .collect(),
        timeline: r.samples.iter().map(|s| row(sim.start, s)).collect(),
    }
}

/// Go's rendering of a duration (`24h0m0s`).
fn go_duration(d: SignedDuration) -> String {
    karpenter_core::api::Duration::from_nanos(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .to_string()
}

/// The JSON document of a simulation.
pub fn output(sim: &Simulation) -> SimulateOutput {
    let every = row_steps(sim);
    let consolidated = run_output(sim, &sim.consolidated, every);
    let baseline = run_output(sim, &sim.baseline, every);
    let saved = sim.baseline.cost - sim.consolidated.cost;
    let percent = if sim.baseline.cost > 0.0 {
        saved / sim.baseline.cost * 100.0
    } else {
        0.0
    };
    SimulateOutput {
        api_version: API_VERSION,
        catalog: sim.catalog.clone(),
        settings: Settings {
            duration: go_duration(sim.options.duration),
            step: go_duration(sim.options.step),
            seed: sim.options.seed,
            faults: sim.options.faults.to_string(),
            packing: sim.options.packing.map(|p| p.to_string()),
            start: sim.start.to_string(),
            spot_interruptions_per_node_hour: sim.spot_rate,
            row_minutes: sim.options.step.as_secs() / 60 * i64::try_from(every).unwrap_or(i64::MAX),
        },
        node_pools: sim.node_pools.clone(),
        consolidated,
        baseline,
        saving: Saving {
            cost: round(saved, 4),
            percent: round(percent, 2),
        },
    }
}

/// The JSON text (pretty, with a final newline).
pub fn to_json(sim: &Simulation) -> Result<String, serde_json::Error> {
    let mut s = serde_json::to_string_pretty(&output(sim))?;
    s.push('\n');
    Ok(s)
}

fn right(s: impl ToString) -> Cell {
    Cell::new(s.to_string()).set_alignment(CellAlignment::Right)
}

fn money(x: f64) -> String {
    format!("${x:.2}")
}

fn clock(minute: i64) -> String {
    format!("{:02}:{:02}", minute / 60, minute % 60)
}

/// The report for people.
pub fn to_table(sim: &Simulation) -> String {
    let out_doc = output(sim);
    let mut out = String::new();
    let s = &out_doc.settings;
    let _ = write!(
        out,
        "Simulated {} in {} steps (seed {}, faults: {}) on catalog {}",
        s.duration, s.step, s.seed, s.faults, out_doc.catalog.name
    );
    if let Some(r) = &out_doc.catalog.region {
        let _ = write!(out, " ({r})");
    }
    if let Some(p) = &out_doc.catalog.spot_prices {
        let _ = write!(out, "; spot prices: {p}");
    }
    out.push('\n');
    let _ = writeln!(out, "NodePools: {}", out_doc.node_pools.join(", "));
    if s.spot_interruptions_per_node_hour > 0.0 {
        let _ = writeln!(
            out,
            "Spot interruptions: {} per spot node per hour",
            s.spot_interruptions_per_node_hour
        );
    }
    out.push('\n');
    let _ = writeln!(
        out,
        "Cost over time (time since the start; baseline: the same run with consolidateAfter: Never)"
    );
    let mut t = Table::new();
    t.load_preset(presets::ASCII_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Disabled);
    t.set_header(vec![
        "Time",
        "Nodes",
        "$/hour",
        "Total",
        "Pending pods",
        "Baseline nodes",
        "Baseline $/hour",
        "Baseline total",
    ]);
    for (c, b) in out_doc
        .consolidated
        .rows
        .iter()
        .zip(out_doc.baseline.rows.iter())
    {
        t.add_row(vec![
            right(clock(c.minute)),
            right(c.nodes),
            right(format!("{:.4}", c.cost_per_hour)),
            right(money(c.cumulative_cost)),
            right(c.pending_pods),
            right(b.nodes),
            right(format!("{:.4}", b.cost_per_hour)),
            right(money(b.cumulative_cost)),
        ]);
    }
    let _ = writeln!(out, "{t}");
    out.push('\n');

    let c = &out_doc.consolidated;
    let b = &out_doc.baseline;
    let mut t = Table::new();
    t.load_preset(presets::ASCII_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Disabled);
    t.set_header(vec!["", "Consolidated", "Baseline"]);
    let pair = |t: &mut Table, name: &str, x: String, y: String| {
        t.add_row(vec![Cell::new(name), right(x), right(y)]);
    };
    pair(&mut t, "Cost", money(c.cost), money(b.cost));
    pair(
        &mut t,
        "Average nodes",
        format!("{:.2}", c.average_nodes),
        format!("{:.2}", b.average_nodes),
    );
    pair(
        &mut t,
        "Peak nodes",
        c.peak_nodes.to_string(),
        b.peak_nodes.to_string(),
    );
    pair(
        &mut t,
        "Nodes launched",
        c.nodes_launched.to_string(),
        b.nodes_launched.to_string(),
    );
    let reasons: std::collections::BTreeSet<&String> = c
        .nodes_removed
        .keys()
        .chain(b.nodes_removed.keys())
        .collect();
    for r in reasons {
        let get = |m: &BTreeMap<String, usize>| m.get(r).copied().unwrap_or(0).to_string();
        pair(
            &mut t,
            &format!("Nodes removed: {}", r.replace('_', " ")),
            get(&c.nodes_removed),
            get(&b.nodes_removed),
        );
    }
    pair(
        &mut t,
        "Nodes terminated",
        c.nodes_terminated.to_string(),
        b.nodes_terminated.to_string(),
    );
    pair(
        &mut t,
        "Pods disrupted",
        c.pods_disrupted.to_string(),
        b.pods_disrupted.to_string(),
    );
    pair(
        &mut t,
        "Pods evicted",
        c.evictions.to_string(),
        b.evictions.to_string(),
    );
    pair(
        &mut t,
        "Peak pending pods",
        c.peak_pending_pods.to_string(),
        b.peak_pending_pods.to_string(),
    );
    if c.spot_interruptions + b.spot_interruptions > 0 {
        pair(
            &mut t,
            "Spot interruptions",
            c.spot_interruptions.to_string(),
            b.spot_interruptions.to_string(),
        );
    }
    let faults: std::collections::BTreeSet<&String> =
        c.faults.keys().chain(b.faults.keys()).collect();
    for f in faults {
        let get = |m: &BTreeMap<String, usize>| m.get(f).copied().unwrap_or(0).to_string();
        pair(
            &mut t,
            &format!("Faults: {f}"),
            get(&c.faults),
            get(&b.faults),
        );
    }
    if c.restarts + b.restarts > 0 {
        pair(
            &mut t,
            "Controller restarts",
            c.restarts.to_string(),
            b.restarts.to_string(),
        );
    }
    let _ = writeln!(out, "{t}");
    out.push('\n');
    let sv = &out_doc.saving;
    if sv.cost >= 0.0 {
        let _ = writeln!(
            out,
            "Consolidation saved {} ({:.1}% of the baseline's {}).",
            money(sv.cost),
            sv.percent,
            money(b.cost)
        );
    } else {
        let _ = writeln!(
            out,
            "Consolidation cost {} more than the baseline ({:.1}%): replacements and churn outweighed the savings.",
            money(-sv.cost),
            -sv.percent
        );
    }
    out
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A "nice" tick step for a range (1, 2 or 5 × a power of ten).
fn tick_step(max: f64, ticks: f64) -> f64 {
    if max <= 0.0 || !max.is_finite() {
        return 1.0;
    }
    let raw = max / ticks;
    let p = 10f64.powf(raw.log10().floor());
    let m = raw / p;
    let nice = if m <= 1.0 {
        1.0
    } else if m <= 2.0 {
        2.0
    } else if m <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * p
}

/// The chart: cost per hour over time for both runs, as a hand-written SVG.
pub fn to_svg(sim: &Simulation) -> String {
    const W: f64 = 800.0;
    const H: f64 = 360.0;
    const L: f64 = 70.0;
    const R: f64 = 20.0;
    const T: f64 = 40.0;
    const B: f64 = 50.0;
    let pw = W - L - R;
    let ph = H - T - B;
    let total_min = (sim.options.duration.as_secs() as f64 / 60.0).max(1.0);
    let series = [
        (&sim.consolidated.samples, "#1f77b4", "", "consolidated"),
        (
            &sim.baseline.samples,
            "#d62728",
            " stroke-dasharray=\"6 4\"",
            "baseline (consolidateAfter: Never)",
        ),
    ];
    let max_cost = series
        .iter()
        .flat_map(|(s, ..)| s.iter().map(|x| x.cost_per_hour))
        .fold(0.0f64, f64::max);
    let ystep = tick_step(max_cost, 5.0);
    let ymax = ((max_cost / ystep).ceil() * ystep).max(ystep);
    let x = |min: f64| L + min / total_min * pw;
    let y = |c: f64| T + ph - c / ymax * ph;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\" font-family=\"sans-serif\" font-size=\"12\">"
    );
    let _ = writeln!(s, "<rect width=\"{W}\" height=\"{H}\" fill=\"white\"/>");
    let title = format!(
        "karpenter simulate: cost per hour ({}, seed {}, faults: {})",
        go_duration(sim.options.duration),
        sim.options.seed,
        sim.options.faults
    );
    let _ = writeln!(
        s,
        "<text x=\"{L}\" y=\"22\" font-size=\"14\">{}</text>",
        xml_escape(&title)
    );
    // Y grid and labels.
    let mut v = 0.0;
    while v <= ymax + ystep / 2.0 {
        let yy = y(v);
        let _ = writeln!(
            s,
            "<line x1=\"{L}\" y1=\"{yy:.1}\" x2=\"{:.1}\" y2=\"{yy:.1}\" stroke=\"#ddd\"/>",
            L + pw
        );
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">${v:.2}</text>",
            L - 6.0,
            yy + 4.0
        );
        v += ystep;
    }
    // X labels in hours.
    let hours = total_min / 60.0;
    let xstep = tick_step(hours, 8.0).max(if hours < 1.0 { 0.25 } else { 1.0 });
    let mut h = 0.0;
    while h <= hours + 1e-9 {
        let xx = x(h * 60.0);
        let _ = writeln!(
            s,
            "<line x1=\"{xx:.1}\" y1=\"{:.1}\" x2=\"{xx:.1}\" y2=\"{:.1}\" stroke=\"#999\"/>",
            T + ph,
            T + ph + 5.0
        );
        let _ = writeln!(
            s,
            "<text x=\"{xx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{h}h</text>",
            T + ph + 18.0
        );
        h += xstep;
    }
    let _ = writeln!(
        s,
        "<rect x=\"{L}\" y=\"{T}\" width=\"{pw}\" height=\"{ph}\" fill=\"none\" stroke=\"#999\"/>"
    );
    let _ = writeln!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">time since the start</text>",
        L + pw / 2.0,
        H - 10.0
    );
    // Series: a step line (cost holds until the next sample).
    for (i, (samples, color, dash, name)) in series.iter().enumerate() {
        let mut pts = vec![format!("{:.1},{:.1}", x(0.0), y(0.0))];
        let mut prev_min = 0.0;
        for smp in samples.iter() {
            let m = smp.at.as_secs() as f64 / 60.0;
            // Each sample is the price at the end of its step: draw it across the step.
            pts.push(format!("{:.1},{:.1}", x(prev_min), y(smp.cost_per_hour)));
            pts.push(format!("{:.1},{:.1}", x(m), y(smp.cost_per_hour)));
            prev_min = m;
        }
        let _ = writeln!(
            s,
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"1.5\"{dash} points=\"{}\"/>",
            pts.join(" ")
        );
        let ly = T + 14.0 + 16.0 * i as f64;
        let lx = L + pw - 250.0;
        let _ = writeln!(
            s,
            "<line x1=\"{lx:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{color}\" stroke-width=\"2\"{dash}/>",
            ly - 4.0,
            lx + 24.0,
            ly - 4.0
        );
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{ly:.1}\">{}</text>",
            lx + 30.0,
            xml_escape(name)
        );
    }
    s.push_str("</svg>\n");
    s
}
