//! The bars that compare Bosun with another operator in the same run: the open-loop latency
//! (against fixed bounds and the bare kube-rs controller), the CPU against kube-rs at 10,000
//! live objects and over a restart, and the Python SDK against Kopf. Each is judged only when
//! both sides were measured (`n/a` otherwise).

use super::report::{Bar, MIB, Results, Side};
use super::workloads::{Backlog, Live, Restart};

/// A bar on one value.
fn bar(name: &str, value: Option<f64>, fmt: &dyn Fn(f64) -> String, ok: &dyn Fn(f64) -> bool) -> Bar {
    Bar { name: name.into(), value: value.map(fmt).unwrap_or_else(|| "not measured".into()), pass: value.map(ok) }
}

/// A bar on two values (ours, theirs).
fn pair(name: &str, pair: Option<(f64, f64)>, fmt: &dyn Fn(f64, f64) -> String, ok: &dyn Fn(f64, f64) -> bool) -> Bar {
    Bar {
        name: name.into(),
        value: pair.map(|(a, b)| fmt(a, b)).unwrap_or_else(|| "not measured".into()),
        pass: pair.map(|(a, b)| ok(a, b)),
    }
}

fn ms(v: f64) -> String {
    format!("{v:.1} ms")
}

fn open(s: &Side) -> Option<&Live> {
    s.open.as_ref().ok()
}

fn open_delete(s: &Side) -> Option<&Live> {
    s.open_delete.as_ref().ok()
}

fn restart(s: &Side) -> Option<&Restart> {
    s.restart.as_ref().ok()
}

/// The controller's own CPU per object created live in the restart workload's first run (the
/// handler server's left out).
fn controller_live_cpu(r: &Restart) -> f64 {
    (r.live_cpu_s - r.live_handler_cpu_s) * 1000.0 / r.objects.max(1) as f64
}

impl Results {
    /// Open-loop latency: fixed bounds with the Rust SDK, and against kube-rs in the same run.
    pub(super) fn open_loop_bars(&self) -> Vec<Bar> {
        let b = &self.bosun;
        let mut bars = vec![
            bar("open loop: p99 <= 50 ms (Rust SDK)", open(b).map(|l| l.p99_ms), &ms, &|v| v <= 50.0),
            bar("open loop with a delete handler: p99 <= 100 ms (Rust SDK)", open_delete(b).map(|l| l.p99_ms), &ms, &|v| v <= 100.0),
        ];
        if let Some(k) = &self.kube_rs {
            // The worse of the two runs' ratios.
            let ratio = |f: fn(&Side) -> Option<&Live>| Some((f(b)?.p99_ms, f(k)?.p99_ms));
            let worst = match (ratio(open), ratio(open_delete)) {
                (Some(a), Some(d)) => Some(if a.0 / a.1.max(1e-9) >= d.0 / d.1.max(1e-9) { a } else { d }),
                (one, other) => one.or(other),
            };
            bars.push(pair(
                "open loop: p99 <= 1.5x kube-rs's (worse of with/without delete)",
                worst,
                &|o, k| format!("{:.2}x ({o:.1} ms vs {k:.1} ms)", o / k.max(1e-9)),
                &|o, k| o <= 1.5 * k,
            ));
        }
        bars
    }

    /// Against the bare kube-rs controller: CPU per object at 10,000 objects created live (the
    /// controller alone, and with the Rust SDK's handler server), and over the restart.
    pub(super) fn kube_rs_bars(&self) -> Vec<Bar> {
        let Some(reference) = &self.kube_rs else { return Vec::new() };
        let both = |f: fn(&Restart) -> f64| restart(&self.bosun).map(f).zip(restart(reference).map(f));
        let kube = |f: fn(&Restart) -> f64| both(f).map(|(_, k)| k);
        let ratio = |o: f64, k: f64| format!("{:.2}x ({o:.3} ms vs {k:.3} ms)", o / k.max(1e-9));
        vec![
            pair(
                "live creation: controller CPU/object <= 1.3x kube-rs",
                restart(&self.bosun).map(controller_live_cpu).zip(kube(Restart::live_cpu_ms_per_object)),
                &ratio,
                &|o, k| o <= 1.3 * k,
            ),
            pair(
                "live creation: controller + handler srv CPU/object <= 1.6x kube-rs",
                both(Restart::live_cpu_ms_per_object),
                &ratio,
                &|o, k| o <= 1.6 * k,
            ),
            pair("restart: CPU/object <= kube-rs's", both(Restart::cpu_ms_per_object), &ratio, &|o, k| o <= k),
        ]
    }

    /// The Python SDK: its own open-loop latency and handler-server CPU, and against Kopf.
    pub(super) fn python_bars(&self) -> Vec<Bar> {
        let Some(python) = &self.python else { return Vec::new() };
        let mut bars = vec![
            bar("Python: open loop p99 <= 100 ms", open(python).map(|l| l.p99_ms), &ms, &|v| v <= 100.0),
            bar(
                "Python: handler server CPU per call <= 0.15 ms (10,000 live)",
                restart(python).map(Restart::live_handler_cpu_ms_per_object),
                &|v| format!("{v:.3} ms"),
                &|v| v <= 0.15,
            ),
        ];
        let Some((_, kopf)) = &self.kopf else { return bars };
        let backlog = |f: fn(&Backlog) -> f64| python.backlog.as_ref().ok().map(f).zip(kopf.backlog.as_ref().ok().map(f));
        bars.push(pair(
            "Python: backlog handled >= 3x faster than Kopf",
            backlog(|b| b.seconds),
            &|p, k| format!("{:.1}x ({p:.3} s vs {k:.3} s)", k / p.max(1e-9)),
            &|p, k| k / p.max(1e-9) >= 3.0,
        ));
        bars.push(pair(
            "Python: controller + server CPU/object <= 1/5 of Kopf's",
            backlog(Backlog::cpu_ms_per_object),
            &|p, k| format!("{:.1}x ({p:.3} ms vs {k:.3} ms)", k / p.max(1e-9)),
            &|p, k| p <= k / 5.0,
        ));
        // Each workload against Kopf's same workload; the worst ratio is shown.
        let rss = |s: &Side| -> Vec<Option<f64>> {
            let live = |r: &Result<Live, String>| r.as_ref().ok().map(|l| l.peak_rss as f64);
            vec![s.backlog.as_ref().ok().map(|b| b.peak_rss as f64), live(&s.live), live(&s.live_delete)]
        };
        let names = ["backlog", "live", "live-delete"];
        let measured: Option<Vec<(&str, f64, f64)>> =
            names.iter().zip(rss(python)).zip(rss(kopf)).map(|((n, p), k)| Some((*n, p?, k?))).collect();
        let worst = measured.as_ref().and_then(|m| m.iter().copied().max_by(|a, b| (a.1 / a.2).total_cmp(&(b.1 / b.2))));
        bars.push(Bar {
            name: "Python: RSS of both processes <= 2/3 of Kopf's, each workload".into(),
            value: worst
                .map(|(n, p, k)| format!("worst {n}: {:.1} MiB vs {:.1} MiB ({:.2})", p / MIB, k / MIB, p / k))
                .unwrap_or_else(|| "not measured".into()),
            pass: measured.map(|m| m.iter().all(|(_, p, k)| *p <= k * 2.0 / 3.0)),
        });
        bars
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_controllers_own_live_cpu_leaves_the_handler_server_out() {
        let r = Restart { objects: 1000, live_cpu_s: 0.5, live_handler_cpu_s: 0.2, ..Default::default() };
        assert!((controller_live_cpu(&r) - 0.3).abs() < 1e-9);
        assert!((Restart::live_cpu_ms_per_object(&r) - 0.5).abs() < 1e-9);
    }

    #[test]
    fn a_bar_without_a_measurement_is_not_judged() {
        let unjudged = bar("x", None, &ms, &|_| true);
        assert_eq!((unjudged.pass, unjudged.value.as_str()), (None, "not measured"));
        let judged = pair("y", Some((2.0, 1.0)), &|a, b| format!("{a} {b}"), &|a, b| a <= 1.5 * b);
        assert_eq!(judged.pass, Some(false));
    }
}
