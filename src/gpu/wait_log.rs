//! `SEGSPARSE_WAIT_LOG=1`: where the host waits for the device, and what it does in between.
//!
//! A stream-ordered computation keeps the device busy only while the host queues work ahead of
//! it. Every read-back (a [`Gpu::download`](super::Gpu::download), a synchronisation, an event
//! wait) drains the queue: the device then idles until the host has queued the next kernel.
//! Allocations and memory-preflight queries are driver calls on the host's critical path too.
//! With the variable set, each [`Gpu`](super::Gpu) records per call site (file and line of the
//! caller, through `#[track_caller]`) and per kind: how many calls, the seconds spent inside
//! them, and for the blocking kinds the host seconds since the previous blocking call returned
//! (the time the host took to queue what the device then ran). [`Gpu::take_wait_log`] returns
//! and clears the sites; [`Gpu::print_wait_log`] prints them. Without the variable nothing is
//! recorded (one branch per call).
//!
//! [`Gpu::take_wait_log`]: super::Gpu::take_wait_log
//! [`Gpu::print_wait_log`]: super::Gpu::print_wait_log

use std::collections::HashMap;
use std::panic::Location;
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// What a recorded call did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WaitKind {
    /// A device-to-host copy (it waits for the stream first).
    Download,
    /// A stream synchronisation.
    Synchronize,
    /// A wait for a CUDA event (timing with [`Gpu::time`](super::Gpu::time)).
    Event,
    /// A host-to-device copy of host memory.
    Upload,
    /// A device allocation (`cuMemAllocAsync`).
    Alloc,
    /// A memory preflight: the driver's free-memory and pool queries.
    MemoryQuery,
}

impl WaitKind {
    /// Whether the call waits for the device's queue to drain.
    pub fn blocks(self) -> bool {
        matches!(
            self,
            WaitKind::Download | WaitKind::Synchronize | WaitKind::Event
        )
    }

    fn label(self) -> &'static str {
        match self {
            WaitKind::Download => "download",
            WaitKind::Synchronize => "synchronize",
            WaitKind::Event => "event wait",
            WaitKind::Upload => "upload",
            WaitKind::Alloc => "alloc",
            WaitKind::MemoryQuery => "memory query",
        }
    }
}

/// One call site's record.
#[derive(Clone, Debug)]
pub struct WaitSite {
    /// The caller's file and line.
    pub file: &'static str,
    /// The caller's line.
    pub line: u32,
    /// What the calls did.
    pub kind: WaitKind,
    /// Calls.
    pub count: usize,
    /// Seconds inside the calls (for a blocking kind: the device's remaining queue, plus the
    /// copy).
    pub seconds: f64,
    /// For a blocking kind, host seconds between the previous blocking call's return and this
    /// call (what the host did while the device ran, or idled, before this wait).
    pub host_before: f64,
    /// Bytes copied (downloads and uploads).
    pub bytes: u64,
}

/// Whether `SEGSPARSE_WAIT_LOG=1`.
pub(crate) fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("SEGSPARSE_WAIT_LOG").is_ok_and(|v| v == "1"))
}

type Key = (&'static str, u32, WaitKind);

#[derive(Default)]
struct State {
    sites: HashMap<Key, WaitSite>,
    /// When the last blocking call returned.
    last: Option<Instant>,
}

/// The records of one [`Gpu`](super::Gpu).
#[derive(Default)]
pub(crate) struct WaitLog {
    state: Mutex<State>,
}

impl WaitLog {
    /// Records a call of `kind` from `at` that began at `start` and returns now.
    pub(crate) fn record(
        &self,
        at: &'static Location<'static>,
        kind: WaitKind,
        start: Instant,
        bytes: usize,
    ) {
        let end = Instant::now();
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let before = match (kind.blocks(), s.last) {
            (true, Some(last)) => start.saturating_duration_since(last).as_secs_f64(),
            _ => 0.0,
        };
        if kind.blocks() {
            s.last = Some(end);
        }
        let e = s
            .sites
            .entry((at.file(), at.line(), kind))
            .or_insert_with(|| WaitSite {
                file: at.file(),
                line: at.line(),
                kind,
                count: 0,
                seconds: 0.0,
                host_before: 0.0,
                bytes: 0,
            });
        e.count += 1;
        e.seconds += (end - start).as_secs_f64();
        e.host_before += before;
        e.bytes += bytes as u64;
    }

    /// The sites recorded since the last call, sorted by kind and place; clears them (the next
    /// blocking call's host time counts from now).
    pub(crate) fn take(&self) -> Vec<WaitSite> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.last = Some(Instant::now());
        let mut v: Vec<WaitSite> = s.sites.drain().map(|(_, w)| w).collect();
        v.sort_by(|a, b| (a.kind, a.file, a.line).cmp(&(b.kind, b.file, b.line)));
        v
    }
}

/// The sites as a table with totals per kind, under the heading `label`.
pub fn format(label: &str, sites: &[WaitSite]) -> String {
    use std::fmt::Write;
    let mut out = format!(
        "wait log: {label}\n  kind          calls   inside ms  host before ms   bytes  site\n"
    );
    let mut totals: Vec<(WaitKind, usize, f64, f64)> = Vec::new();
    for w in sites {
        let _ = writeln!(
            out,
            "  {:<12} {:>6} {:>11.3} {:>15.3} {:>7}  {}:{}",
            w.kind.label(),
            w.count,
            w.seconds * 1e3,
            w.host_before * 1e3,
            w.bytes,
            w.file,
            w.line
        );
        match totals.iter_mut().find(|t| t.0 == w.kind) {
            Some(t) => {
                t.1 += w.count;
                t.2 += w.seconds;
                t.3 += w.host_before;
            }
            None => totals.push((w.kind, w.count, w.seconds, w.host_before)),
        }
    }
    for (kind, count, secs, before) in totals {
        let _ = writeln!(
            out,
            "  total {:<12} {:>6} calls, {:.3} ms inside, {:.3} ms host before",
            kind.label(),
            count,
            secs * 1e3,
            before * 1e3
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sites_add_up_and_are_cleared() {
        let log = WaitLog::default();
        let here = Location::caller();
        let t = Instant::now();
        log.record(here, WaitKind::Download, t, 8);
        log.record(here, WaitKind::Download, Instant::now(), 16);
        log.record(here, WaitKind::Alloc, Instant::now(), 0);
        std::thread::sleep(std::time::Duration::from_millis(2));
        log.record(here, WaitKind::Synchronize, Instant::now(), 0);
        let sites = log.take();
        assert_eq!(sites.len(), 3, "{sites:?}");
        let d = &sites[0];
        assert_eq!((d.kind, d.count, d.bytes), (WaitKind::Download, 2, 24));
        assert_eq!(sites[1].kind, WaitKind::Synchronize);
        // The host slept between the last download and the synchronisation.
        assert!(sites[1].host_before >= 0.002, "{:?}", sites[1]);
        assert_eq!(
            (sites[2].kind, sites[2].host_before),
            (WaitKind::Alloc, 0.0)
        );
        let text = format("test", &sites);
        assert!(
            text.contains("total download") && text.contains("2 calls"),
            "{text}"
        );
        assert!(log.take().is_empty());
    }
}
