//! `cluster-doctor`: finds data skew in a running Redis Cluster and fixes it with a
//! load-aware rebalance.
//!
//! It measures what each master holds and does (slots, keys per slot, memory, operations per
//! second), names the big keys, the hash tags that gather keys and the hot keys, asks the
//! planner of `redis-cluster-state` which slots to move so that the load (not the slot
//! count) is even, and with `--apply` moves them with the cluster's migration protocol. A run
//! interrupted half way leaves slots open; the next run closes them first, losing no key.
//!
//! ```text
//! cluster-doctor 127.0.0.1:7000 [--weight keys|memory|ops|mix]
//!     [--ratio 1.2] [--capacity ADDR=W]... [--sample SECS] [--scan KEYS] [--top N]
//!     [--json] [--svg FILE] [--apply [--dry-run]] [--batch KEYS] [--quiet]
//! ```

mod apply;
mod conn;
mod report;
mod survey;

use std::process::ExitCode;
use std::time::Duration;

use redis_cluster_state::rebalance::{Closing, Plan, PlanOptions, SlotLoad, plan};

use crate::survey::{SLOTS, Survey, SurveyOptions};

/// What the balance weighs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Weight {
    Keys,
    Memory,
    Ops,
    /// Keys, memory and operations, each as a share of its total, averaged.
    Mix,
}

impl Weight {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Keys => "keys",
            Self::Memory => "memory",
            Self::Ops => "ops",
            Self::Mix => "mix",
        }
    }
}

pub(crate) struct Options {
    pub(crate) addr: String,
    pub(crate) weight: Weight,
    pub(crate) ratio: f64,
    pub(crate) capacities: Vec<(String, u32)>,
    pub(crate) sample: Duration,
    pub(crate) scan_limit: u64,
    pub(crate) top: usize,
    pub(crate) json: bool,
    pub(crate) svg: Option<String>,
    pub(crate) apply: bool,
    pub(crate) dry_run: bool,
    pub(crate) batch: usize,
    pub(crate) quiet: bool,
    /// `--atomic`: move slots with the servers' own atomic slot migration (`CLUSTER
    /// MIGRATESLOTS`, Valkey 9.0 and later) instead of key by key.
    pub(crate) atomic: bool,
}

const USAGE: &str = "usage: cluster-doctor [HOST:PORT] [--weight keys|memory|ops|mix] [--ratio R] \
[--capacity ADDR_OR_ID=W]... [--sample SECS] [--scan KEYS] [--top N] [--json] [--svg FILE] \
[--apply [--dry-run] [--atomic]] [--batch KEYS] [--quiet]
  --atomic  move each source's slots with one CLUSTER MIGRATESLOTS (Valkey 9.0 and later: the
            servers copy and hand over the slots themselves) instead of MIGRATE key by key";

/// The value of the option `name` that `args` just read.
fn value(args: &mut lexopt::Parser, name: &str) -> Result<String, String> {
    let value = args.value().map_err(|e| e.to_string())?;
    value
        .into_string()
        .map_err(|text| format!("{name}: not UTF-8: {}", text.to_string_lossy()))
}

fn parse(args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut options = Options {
        addr: "127.0.0.1:7000".into(),
        weight: Weight::Keys,
        ratio: 1.2,
        capacities: Vec::new(),
        sample: Duration::from_secs(2),
        scan_limit: 1_000_000,
        top: 5,
        json: false,
        svg: None,
        apply: false,
        dry_run: false,
        batch: 100,
        quiet: false,
        atomic: false,
    };
    let mut args = lexopt::Parser::from_args(args);
    let number = |name: &str, text: String| -> Result<f64, String> {
        text.parse::<f64>()
            .ok()
            .filter(|n| n.is_finite() && *n >= 0.0)
            .ok_or(format!("{name}: not a number: {text}"))
    };
    while let Some(arg) = args.next().map_err(|e| e.to_string())? {
        use lexopt::Arg::{Long, Short, Value};
        match arg {
            Long("weight") => {
                options.weight = match value(&mut args, "--weight")?.as_str() {
                    "keys" => Weight::Keys,
                    "memory" => Weight::Memory,
                    "ops" => Weight::Ops,
                    "mix" => Weight::Mix,
                    other => {
                        return Err(format!("--weight: keys, memory, ops or mix, not {other}"));
                    }
                }
            }
            Long("ratio") => {
                options.ratio = number("--ratio", value(&mut args, "--ratio")?)?;
                if options.ratio < 1.0 {
                    return Err("--ratio must be at least 1.0".into());
                }
            }
            Long("capacity") => {
                let text = value(&mut args, "--capacity")?;
                let (node, weight) = text
                    .rsplit_once('=')
                    .filter(|(node, _)| !node.is_empty())
                    .ok_or("--capacity takes ADDR_OR_ID=WEIGHT")?;
                let weight = weight
                    .parse()
                    .map_err(|_| format!("--capacity: not a whole number: {weight}"))?;
                options.capacities.push((node.to_owned(), weight));
            }
            Long("sample") => {
                options.sample =
                    Duration::from_secs_f64(number("--sample", value(&mut args, "--sample")?)?)
            }
            Long("scan") => {
                options.scan_limit = number("--scan", value(&mut args, "--scan")?)? as u64
            }
            Long("top") => options.top = number("--top", value(&mut args, "--top")?)? as usize,
            Long("batch") => {
                options.batch = (number("--batch", value(&mut args, "--batch")?)? as usize).max(1)
            }
            Long("svg") => options.svg = Some(value(&mut args, "--svg")?),
            Long("json") => options.json = true,
            Long("apply") => options.apply = true,
            Long("dry-run") => options.dry_run = true,
            Long("quiet") => options.quiet = true,
            Long("atomic") => options.atomic = true,
            Short('h') | Long("help") => return Err(USAGE.into()),
            Value(addr) => {
                options.addr = addr
                    .into_string()
                    .map_err(|addr| format!("not UTF-8: {}", addr.to_string_lossy()))?
            }
            other => return Err(format!("{}\n{USAGE}", other.unexpected())),
        }
    }
    Ok(options)
}

/// Each slot's load by the chosen weight, and its cost: its estimated bytes (the keys times
/// their master's mean size, with the big keys found counted at their own size).
pub(crate) fn slot_loads(survey: &Survey, weight: Weight) -> Vec<SlotLoad> {
    let masters = &survey.masters;
    // Per master: the bytes and count of the big keys found, and the mean of the others.
    let mut big_bytes = vec![0u64; masters.len()];
    let mut big_count = vec![0u64; masters.len()];
    let mut big_in_slot = vec![(0u64, 0u64); SLOTS];
    for key in &survey.big {
        big_bytes[key.master] += key.bytes;
        big_count[key.master] += 1;
        let entry = &mut big_in_slot[usize::from(key.slot)];
        entry.0 += 1;
        entry.1 += key.bytes;
    }
    let mean_size: Vec<f64> = masters
        .iter()
        .enumerate()
        .map(|(m, master)| {
            let others = master.keys.saturating_sub(big_count[m]).max(1);
            master.dataset.saturating_sub(big_bytes[m]) as f64 / others as f64
        })
        .collect();
    // Each slot's keys, bytes and operations: its measured CPU µs where the servers give
    // it (SLOT-STATS), else its master's operations per second shared by key count.
    let measures: Vec<[f64; 3]> = (0..SLOTS)
        .map(|slot| {
            let Some(m) = survey.owner[slot] else {
                return [0.0; 3];
            };
            let keys = survey.slot_keys[slot];
            let (n_big, b_big) = big_in_slot[slot];
            let bytes = keys.saturating_sub(n_big) as f64 * mean_size[m] + b_big as f64;
            let ops = match &survey.slot_cpu {
                Some(cpu) => cpu[slot] as f64,
                None => keys as f64 * masters[m].ops / masters[m].keys.max(1) as f64,
            };
            [keys as f64, bytes, ops]
        })
        .collect();
    let totals: Vec<f64> = (0..3)
        .map(|i| measures.iter().map(|m| m[i]).sum())
        .collect();
    let share = |i: usize, m: &[f64; 3]| {
        if totals[i] > 0.0 {
            m[i] / totals[i]
        } else {
            0.0
        }
    };
    (0..SLOTS)
        .map(|slot| {
            let m = &measures[slot];
            let load = match weight {
                Weight::Keys => m[0],
                Weight::Memory => m[1],
                // Thousandths of an operation per second, to keep the integer load fine.
                Weight::Ops => m[2] * 1000.0,
                // Each measure as a share of its total, the three shares averaged, in
                // billionths.
                Weight::Mix => (share(0, m) + share(1, m) + share(2, m)) / 3.0 * 1e9,
            };
            SlotLoad {
                owner: survey.owner[slot],
                load: load as u64,
                cost: m[1] as u64,
            }
        })
        .collect()
}

fn capacities(survey: &Survey, options: &Options) -> Result<Vec<u32>, String> {
    let mut capacities = vec![1u32; survey.masters.len()];
    for (node, weight) in &options.capacities {
        let found = survey
            .masters
            .iter()
            .position(|m| m.addr() == *node || m.id.starts_with(node.as_str()))
            .ok_or(format!("--capacity: no master {node}"))?;
        capacities[found] = *weight;
    }
    Ok(capacities)
}

fn make_plan(survey: &Survey, options: &Options) -> Result<(Vec<SlotLoad>, Plan), String> {
    let loads = slot_loads(survey, options.weight);
    let plan_options = PlanOptions {
        ratio_permille: (options.ratio * 1000.0).round() as u32,
        capacities: capacities(survey, options)?,
    };
    let plan = plan(&loads, &plan_options).map_err(|e| e.to_string())?;
    Ok((loads, plan))
}

fn run(options: &Options) -> Result<(), String> {
    let survey_options = SurveyOptions {
        scan_limit: options.scan_limit,
        sample: options.sample,
        top: options.top,
        progress: !options.quiet,
    };
    let fail = |e: std::io::Error| e.to_string();
    if options.apply && options.atomic {
        // A run stopped while the servers moved slots: their migrations go on without it,
        // so wait for them to end before measuring.
        let (masters, _) = survey::topology(&options.addr).map_err(fail)?;
        let mut mover = apply::Mover::new(&masters, options.batch, 60_000).map_err(fail)?;
        mover.check_atomic().map_err(fail)?;
        mover.wait_for_migrations().map_err(fail)?;
    }
    let mut survey = survey::survey(&options.addr, &survey_options).map_err(fail)?;
    if options.apply && !survey.open.is_empty() {
        // Close what an interrupted run left open, then measure again.
        let mut mover = apply::Mover::new(&survey.masters, options.batch, 60_000).map_err(fail)?;
        for open in &survey.open {
            let closing = mover.closing(open).map_err(fail)?;
            let what = match closing {
                Closing::Finish { from, to } => format!(
                    "finishing its move from {} to {}",
                    survey.masters[from].addr(),
                    survey.masters[to].addr()
                ),
                Closing::RollBack => "rolling it back (no key had moved)".into(),
            };
            if !options.quiet {
                eprintln!("slot {} was left open: {what}", open.slot);
            }
            if !options.dry_run {
                mover.close(open, closing).map_err(fail)?;
            }
        }
        if !options.dry_run {
            drop(mover);
            survey = survey::survey(&options.addr, &survey_options).map_err(fail)?;
        }
    }
    let (loads, plan) = make_plan(&survey, options)?;
    if let Some(path) = &options.svg {
        std::fs::write(path, report::svg(&survey, &plan, options))
            .map_err(|e| format!("{path}: {e}"))?;
    }
    let mut applied = None;
    if options.apply && !options.dry_run && !plan.moves.is_empty() {
        let mut mover = apply::Mover::new(&survey.masters, options.batch, 60_000).map_err(fail)?;
        let mut progress =
            survey::Progress::new("moving slots", plan.moves.len() as u64, !options.quiet);
        let mut keys = 0;
        if options.atomic {
            // One MIGRATESLOTS per source and target, for all of that pair's slots.
            let mut pairs: Vec<((usize, usize), Vec<u16>)> = Vec::new();
            for m in &plan.moves {
                match pairs.iter_mut().find(|(pair, _)| *pair == (m.from, m.to)) {
                    Some((_, slots)) => slots.push(m.slot as u16),
                    None => pairs.push(((m.from, m.to), vec![m.slot as u16])),
                }
            }
            for ((from, to), slots) in pairs {
                keys += mover
                    .migrate_atomic(&slots, from, to)
                    .map_err(|e| format!("{e} (run again: it waits for the servers' moves)"))?;
                progress.advance(slots.len() as u64);
            }
        } else {
            for m in &plan.moves {
                keys += mover.migrate(m.slot as u16, m.from, m.to).map_err(|e| {
                    format!("{e} (run again to finish: open slots are closed first)")
                })?;
                progress.advance(1);
            }
        }
        progress.finish();
        applied = Some((plan.moves.len(), keys));
    }
    let report = report::Report {
        survey: &survey,
        loads: &loads,
        plan: &plan,
        options,
        applied,
    };
    if options.json {
        println!("{}", report::json(&report));
    } else {
        print!("{}", report::text(&report));
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    if args.iter().any(|a| a == "-V" || a == "--version") {
        println!("cluster-doctor {}", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    let options = match parse(args.into_iter()) {
        Ok(options) => options,
        Err(e) => {
            // A command line it cannot follow: status 2, as for any tool's usage error.
            eprintln!("cluster-doctor: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cluster-doctor: {e}");
            ExitCode::FAILURE
        }
    }
}
