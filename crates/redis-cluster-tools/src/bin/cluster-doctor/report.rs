//! The doctor's findings as text, as JSON and as an SVG bar chart, with the advice that
//! goes with them: when one key or one tag is the cause, moving slots cannot help, and the
//! report says so.

use std::fmt::Write as _;

use redis_cluster_state::rebalance::{Plan, SlotLoad};
use serde_json::{Value, json};

use crate::survey::{BigKey, Master, Survey};
use crate::{Options, Weight};

/// max / mean, or 0 when everything is 0.
fn skew(values: impl Iterator<Item = f64> + Clone) -> f64 {
    let n = values.clone().count().max(1) as f64;
    let mean = values.clone().sum::<f64>() / n;
    let max = values.fold(0.0, f64::max);
    if mean > 0.0 { max / mean } else { 0.0 }
}

fn bytes(n: u64) -> String {
    match n {
        0..1024 => format!("{n} B"),
        1024..1_048_576 => format!("{:.1} KiB", n as f64 / 1024.0),
        1_048_576..1_073_741_824 => format!("{:.1} MiB", n as f64 / 1_048_576.0),
        _ => format!("{:.1} GiB", n as f64 / 1_073_741_824.0),
    }
}

fn short(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}

/// `name (type, length N, size) in slot S on host:port`.
fn describe(key: &BigKey, masters: &[Master]) -> String {
    format!(
        "{} ({}, length {}, {}) in slot {} on {}",
        String::from_utf8_lossy(&key.key),
        key.kind,
        key.length,
        bytes(key.bytes),
        key.slot,
        masters[key.master].addr()
    )
}

struct Findings {
    skew_keys: f64,
    skew_memory: f64,
    skew_ops: f64,
    skew_after: f64,
    /// The master with the most load.
    overloaded: usize,
    /// Its heaviest slots: (slot, load).
    driving: Vec<(usize, u64)>,
    moved_keys: u64,
    advice: Vec<String>,
}

fn findings(survey: &Survey, loads: &[SlotLoad], plan: &Plan, options: &Options) -> Findings {
    let masters = &survey.masters;
    let total_keys: u64 = masters.iter().map(|m| m.keys).sum();
    let overloaded = (0..masters.len())
        .max_by_key(|&m| plan.before[m])
        .unwrap_or_default();
    let driving = heaviest(loads, |owner| owner == overloaded);
    let moved_keys = plan.moves.iter().map(|m| survey.slot_keys[m.slot]).sum();

    let mut advice = Vec::new();
    for open in &survey.open {
        advice.push(format!(
            "slot {} was left open by an interrupted migration: run with --apply to close it",
            open.slot
        ));
    }
    for tag in &survey.tags {
        if tag.keys * 20 < total_keys {
            continue;
        }
        advice.push(format!(
            "hash tag {{{}}} keeps {} keys ({:.0}% of all) in slot {} on {}: a tag pins its keys \
             to one slot, so one master carries them all and moving the slot moves them all; \
             spread the keys over more tags",
            tag.tag,
            tag.keys,
            tag.keys as f64 * 100.0 / total_keys.max(1) as f64,
            tag.slot,
            masters[tag.master].addr()
        ));
    }
    for key in &survey.big {
        let dataset = masters[key.master].dataset.max(1);
        if key.bytes < 1 << 20 && key.bytes * 10 < dataset {
            continue;
        }
        advice.push(format!(
            "big key {}: a key moves whole with its slot, so no rebalance makes it smaller; \
             split it or let it expire",
            describe(key, masters)
        ));
    }
    for &slot in &plan.stuck {
        advice.push(format!(
            "slot {slot} alone weighs {} by {}, more than any master's share: moving slots \
             cannot balance the cluster while it does",
            loads[slot].load,
            options.weight.name()
        ));
    }
    if !plan.balanced && plan.stuck.is_empty() {
        let heavy: Vec<String> = heaviest(loads, |_| true)
            .iter()
            .map(|(slot, load)| format!("{slot} ({load})"))
            .collect();
        advice.push(format!(
            "no set of slot moves brings every master within {} of its share: the load sits in \
             a few heavy slots ({}); the plan is the best the search found",
            options.ratio,
            heavy.join(", ")
        ));
    }
    match &survey.hot {
        Some(hot) => {
            if let Some(top) = hot.first().filter(|k| k.freq >= 10) {
                advice.push(format!(
                    "hot key {} (LFU counter {}) on {}: one key is served by one master; read it \
                     from replicas (READONLY) or cache it, moving its slot only moves the heat",
                    String::from_utf8_lossy(&top.key),
                    top.freq,
                    masters[top.master].addr()
                ));
            }
        }
        None => advice.push(format!(
            "hot keys: not measured, no master runs an LFU policy (maxmemory-policy {}); \
             `CONFIG SET maxmemory-policy allkeys-lfu` on every master turns on OBJECT FREQ",
            masters.first().map_or("?", |m| m.policy.as_str())
        )),
    }
    let loads_after = plan.after.iter().map(|&l| l as f64);
    let skew_after = skew(loads_after);
    let skew_before = skew(plan.before.iter().map(|&l| l as f64));
    if plan.moves.is_empty() && plan.balanced {
        advice.push(format!(
            "{} are balanced within {}: nothing to move",
            options.weight.name(),
            options.ratio
        ));
    } else if !plan.moves.is_empty() {
        advice.push(format!(
            "moving {} slots ({} keys, about {}) brings the {} skew from {:.2} to {:.2}{}",
            plan.moves.len(),
            moved_keys,
            bytes(plan.cost),
            options.weight.name(),
            skew_before,
            skew_after,
            if options.apply {
                ""
            } else {
                ": run with --apply to move them"
            }
        ));
    }
    Findings {
        skew_keys: skew(masters.iter().map(|m| m.keys as f64)),
        skew_memory: skew(masters.iter().map(|m| m.memory as f64)),
        skew_ops: skew(masters.iter().map(|m| m.ops)),
        skew_after,
        overloaded,
        driving,
        moved_keys,
        advice,
    }
}

/// The five heaviest slots of the masters `of` picks: (slot, load).
fn heaviest(loads: &[SlotLoad], of: impl Fn(usize) -> bool) -> Vec<(usize, u64)> {
    let mut heavy: Vec<(usize, u64)> = loads
        .iter()
        .enumerate()
        .filter(|(_, l)| l.owner.is_some_and(&of))
        .map(|(slot, l)| (slot, l.load))
        .collect();
    heavy.sort_by_key(|&(slot, load)| (std::cmp::Reverse(load), slot));
    heavy.truncate(5);
    heavy
}

/// What the doctor found and planned, and what it did.
pub(crate) struct Report<'a> {
    pub(crate) survey: &'a Survey,
    pub(crate) loads: &'a [SlotLoad],
    pub(crate) plan: &'a Plan,
    pub(crate) options: &'a Options,
    /// Slots and keys moved by `--apply`.
    pub(crate) applied: Option<(usize, u64)>,
}

impl Report<'_> {
    fn findings(&self) -> Findings {
        findings(self.survey, self.loads, self.plan, self.options)
    }

    fn parts(&self) -> (&Survey, &Plan, &Options, Option<(usize, u64)>) {
        (self.survey, self.plan, self.options, self.applied)
    }
}

pub(crate) fn text(report: &Report<'_>) -> String {
    let (survey, plan, options, applied) = report.parts();
    let f = report.findings();
    let masters = &survey.masters;
    let mut out = String::new();
    let keys: u64 = masters.iter().map(|m| m.keys).sum();
    let _ = writeln!(
        out,
        "{} masters, {} keys, {} used, {:.0} ops/s",
        masters.len(),
        keys,
        bytes(masters.iter().map(|m| m.memory).sum()),
        masters.iter().map(|m| m.ops).sum::<f64>()
    );
    let _ = writeln!(
        out,
        "\n{:<10} {:<22} {:>6} {:>9} {:>11} {:>9} {:>12} {:>12}",
        "master", "address", "slots", "keys", "memory", "ops/s", "load", "after plan"
    );
    for (m, master) in masters.iter().enumerate() {
        let _ = writeln!(
            out,
            "{:<10} {:<22} {:>6} {:>9} {:>11} {:>9.0} {:>12} {:>12}",
            short(&master.id),
            master.addr(),
            master.slots.len(),
            master.keys,
            bytes(master.memory),
            master.ops,
            plan.before[m],
            plan.after[m]
        );
    }
    let _ = writeln!(
        out,
        "\nskew (max / mean): keys {:.2}, memory {:.2}, ops {:.2}; most loaded by {}: {} ({})",
        f.skew_keys,
        f.skew_memory,
        f.skew_ops,
        options.weight.name(),
        masters
            .get(f.overloaded)
            .map_or(String::new(), Master::addr),
        masters.get(f.overloaded).map_or("", |m| short(&m.id))
    );
    let driving: Vec<String> = f
        .driving
        .iter()
        .map(|(slot, load)| format!("{slot} ({load})"))
        .collect();
    let _ = writeln!(out, "its heaviest slots: {}", driving.join(", "));
    let _ = writeln!(out, "a slot's operations: {}", ops_source(survey));
    let _ = writeln!(out, "\nlargest keys (of {} scanned):", survey.scanned);
    for key in &survey.big {
        let _ = writeln!(out, "  {}", describe(key, masters));
    }
    let _ = writeln!(out, "hash tags gathering keys:");
    for tag in &survey.tags {
        let _ = writeln!(
            out,
            "  {{{}}} {} keys in slot {} on {}",
            tag.tag,
            tag.keys,
            tag.slot,
            masters[tag.master].addr()
        );
    }
    match &survey.hot {
        Some(hot) => {
            let _ = writeln!(out, "hot keys (OBJECT FREQ):");
            for key in hot {
                let _ = writeln!(
                    out,
                    "  {} counter {} on {}",
                    String::from_utf8_lossy(&key.key),
                    key.freq,
                    masters[key.master].addr()
                );
            }
        }
        None => {
            let _ = writeln!(out, "hot keys: LFU is off");
        }
    }
    let _ = writeln!(
        out,
        "\nplan ({} within {}): {} slots to move, {} keys, {}, balanced: {}, skew after: {:.2}",
        options.weight.name(),
        options.ratio,
        plan.moves.len(),
        f.moved_keys,
        bytes(plan.cost),
        plan.balanced,
        f.skew_after
    );
    for (from, to, count) in pairs(plan) {
        let _ = writeln!(
            out,
            "  {} slots {} -> {}",
            count,
            masters[from].addr(),
            masters[to].addr()
        );
    }
    if let Some((moves, keys)) = applied {
        let _ = writeln!(out, "applied: {moves} slots moved with {keys} keys");
    } else if options.apply && options.dry_run {
        let _ = writeln!(out, "dry run: nothing moved");
    }
    let _ = writeln!(out, "\nadvice:");
    for line in &f.advice {
        let _ = writeln!(out, "  - {line}");
    }
    out
}

/// (from, to, slots) for each pair of masters the plan moves slots between.
fn pairs(plan: &Plan) -> Vec<(usize, usize, usize)> {
    let mut pairs: Vec<(usize, usize, usize)> = Vec::new();
    for m in &plan.moves {
        match pairs.last_mut() {
            Some((from, to, n)) if *from == m.from && *to == m.to => *n += 1,
            _ => pairs.push((m.from, m.to, 1)),
        }
    }
    pairs
}

/// Where a slot's operations came from, for the report.
fn ops_source(survey: &Survey) -> &'static str {
    if survey.slot_cpu.is_some() {
        "measured per slot (CLUSTER SLOT-STATS cpu-usec)"
    } else {
        "each master's INFO commands per second, shared by key count (no CLUSTER SLOT-STATS \
         with cpu-usec on every master)"
    }
}

pub(crate) fn json(report: &Report<'_>) -> Value {
    let (survey, plan, options, applied) = report.parts();
    let f = report.findings();
    let masters = &survey.masters;
    let addr = |m: usize| masters[m].addr();
    json!({
        "weight": options.weight.name(),
        "ops_source": if survey.slot_cpu.is_some() { "slot-stats" } else { "info-shared" },
        "ratio": options.ratio,
        "masters": masters.iter().enumerate().map(|(m, master)| json!({
            "id": master.id,
            "addr": master.addr(),
            "slots": master.slots.len(),
            "keys": master.keys,
            "memory": master.memory,
            "dataset": master.dataset,
            "ops": master.ops,
            "maxmemory_policy": master.policy,
            "load": plan.before[m],
            "load_after_plan": plan.after[m],
        })).collect::<Vec<_>>(),
        "skew": { "keys": f.skew_keys, "memory": f.skew_memory, "ops": f.skew_ops },
        "overloaded": { "id": masters.get(f.overloaded).map(|m| m.id.clone()),
                        "addr": masters.get(f.overloaded).map(Master::addr) },
        "driving_slots": f.driving.iter().map(|&(slot, load)| json!({
            "slot": slot, "load": load, "keys": survey.slot_keys[slot],
        })).collect::<Vec<_>>(),
        "scanned": survey.scanned,
        "big_keys": survey.big.iter().map(|k| json!({
            "key": String::from_utf8_lossy(&k.key), "type": k.kind, "length": k.length, "bytes": k.bytes,
            "slot": k.slot, "master": addr(k.master),
        })).collect::<Vec<_>>(),
        "tags": survey.tags.iter().map(|t| json!({
            "tag": t.tag, "keys": t.keys, "slot": t.slot, "master": addr(t.master),
        })).collect::<Vec<_>>(),
        "lfu": survey.hot.is_some(),
        "hot_keys": survey.hot.as_ref().map(|hot| hot.iter().map(|k| json!({
            "key": String::from_utf8_lossy(&k.key), "freq": k.freq, "master": addr(k.master),
        })).collect::<Vec<_>>()),
        "open_slots": survey.open.iter().map(|o| json!({
            "slot": o.slot,
            "migrating": o.marks.migrating.iter().map(|&(m, to)| json!([addr(m), addr(to)])).collect::<Vec<_>>(),
            "importing": o.marks.importing.iter().map(|&(m, from)| json!([addr(m), addr(from)])).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "plan": {
            "moves": plan.moves.len(),
            "keys": f.moved_keys,
            "cost_bytes": plan.cost,
            "balanced": plan.balanced,
            "skew_after": f.skew_after,
            "stuck_slots": plan.stuck,
            "pairs": pairs(plan).iter().map(|&(from, to, n)| json!({
                "from": addr(from), "to": addr(to), "slots": n,
            })).collect::<Vec<_>>(),
        },
        "applied": applied.map(|(moves, keys)| json!({ "moves": moves, "keys": keys })),
        "advice": f.advice,
    })
}

/// A bar chart of each master's load before and after the plan.
pub(crate) fn svg(survey: &Survey, plan: &Plan, options: &Options) -> String {
    let masters = &survey.masters;
    let (bar, gap, height, top, left) = (36.0, 28.0, 240.0, 40.0, 60.0);
    let width = left + masters.len() as f64 * (2.0 * bar + gap) + gap;
    let max = plan
        .before
        .iter()
        .chain(&plan.after)
        .copied()
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let mean = plan.before.iter().sum::<u64>() as f64 / masters.len().max(1) as f64;
    let y = |value: f64| top + height - value / max * height;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{:.0}\" \
         font-family=\"sans-serif\" font-size=\"11\">",
        top + height + 50.0
    );
    let unit = match options.weight {
        Weight::Keys => "keys",
        Weight::Memory => "bytes",
        Weight::Ops if survey.slot_cpu.is_some() => "CPU µs per slot, summed (x1000)",
        Weight::Ops => "ops/s (x1000)",
        Weight::Mix => "load (keys, memory and ops shares, x1e9)",
    };
    let _ = writeln!(
        out,
        "<text x=\"{left}\" y=\"20\" font-size=\"13\">{unit} per master: before (grey) and after \
         the plan (blue); the line is the mean</text>"
    );
    for (m, master) in masters.iter().enumerate() {
        let x = left + gap + m as f64 * (2.0 * bar + gap);
        for (i, (value, colour)) in [(plan.before[m], "#999999"), (plan.after[m], "#3b6fb6")]
            .into_iter()
            .enumerate()
        {
            let value = value as f64;
            let bx = x + i as f64 * bar;
            let _ = writeln!(
                out,
                "<rect x=\"{bx:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{colour}\">\
                 <title>{value}</title></rect>",
                y(value),
                bar - 2.0,
                top + height - y(value)
            );
        }
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            x + bar,
            top + height + 16.0,
            master.addr()
        );
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{} / {}</text>",
            x + bar,
            top + height + 30.0,
            plan.before[m],
            plan.after[m]
        );
    }
    let _ = writeln!(
        out,
        "<line x1=\"{left}\" x2=\"{width:.0}\" y1=\"{0:.1}\" y2=\"{0:.1}\" stroke=\"#c33\" \
         stroke-dasharray=\"4 3\"/>",
        y(mean)
    );
    out.push_str("</svg>\n");
    out
}
