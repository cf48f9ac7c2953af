// SPDX-License-Identifier: Apache-2.0
//! A wsel policy behind a gateway's policy trait, shaped as SMG's
//! `smg::policies::LoadBalancingPolicy` (smg 1.13.0, src/policies/mod.rs):
//! select a worker index from the workers and the request. SMG cannot
//! load a policy it does not know yet (docs/integrations.md, "A Rust
//! gateway"), so the traits are declared here; with SMG's own the body of
//! `select_worker` stays as it is.
//!
//! Usage: smg_policy PLUGIN_DIR
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use wsel::{Host, HostOptions, RankState, RequestSpec, Table};

/// What the gateway knows of one worker (SMG: `dyn Worker`).
trait Worker: Send + Sync {
    fn url(&self) -> &str;
    fn load(&self) -> usize;
    fn is_healthy(&self) -> bool;
}

/// The request as the gateway hands it to a policy (SMG: SelectWorkerInfo).
struct SelectWorkerInfo<'a> {
    tokens: Option<&'a [u32]>,
}

/// SMG's policy trait, reduced to what this example implements.
trait LoadBalancingPolicy: Send + Sync {
    fn select_worker(&self, workers: &[Arc<dyn Worker>], info: &SelectWorkerInfo) -> Option<usize>;
    fn name(&self) -> &'static str;
}

struct WselPolicy {
    host: Host,
    next_id: AtomicU64,
}

/// A worker's stable id: FNV-1a of its URL.
fn worker_id(url: &str) -> u64 {
    url.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

impl LoadBalancingPolicy for WselPolicy {
    fn select_worker(&self, workers: &[Arc<dyn Worker>], info: &SelectWorkerInfo) -> Option<usize> {
        let mut ranks: Vec<(RankState, usize)> = workers.iter().enumerate().map(|(i, w)| {
            let flags = if w.is_healthy() { 0 } else { wsel::ROW_EXCLUDED as u8 };
            (RankState { worker_id: worker_id(w.url()), active_requests: w.load() as u32, flags,
                         ..Default::default() }, i)
        }).collect();
        ranks.sort_by_key(|(r, _)| r.worker_id); // the table's canonical order
        let isl = info.tokens.map_or(0, |t| t.len() as u32);
        let mut req = self.host.request(RequestSpec::new(self.next_id.fetch_add(1, Ordering::Relaxed), isl));
        let mut table = Table::new(ranks.len() as u32).ok()?;
        let states: Vec<RankState> = ranks.iter().map(|(r, _)| *r).collect();
        table.build(&req, &states, 1).ok()?;
        let choice = self.host.select(&mut req, &table).ok()?;
        Some(ranks[choice.row].1)
    }

    fn name(&self) -> &'static str {
        "wsel"
    }
}

struct FakeWorker {
    url: String,
    load: usize,
}

impl Worker for FakeWorker {
    fn url(&self) -> &str {
        &self.url
    }
    fn load(&self) -> usize {
        self.load
    }
    fn is_healthy(&self) -> bool {
        true
    }
}

fn main() -> Result<(), wsel::Error> {
    let plugins = std::env::args().nth(1).expect("usage: smg_policy PLUGIN_DIR");
    let host = Host::new(&HostOptions { seed: 42, ..Default::default() })?;
    // llm-d's default profile: its queue scorer reads requests in flight.
    host.switch(format!("{plugins}/llmd_default.so"), None)?;
    let policy: Box<dyn LoadBalancingPolicy> = Box::new(WselPolicy { host, next_id: AtomicU64::new(1) });
    let workers: Vec<Arc<dyn Worker>> = [("http://w1:8000", 7), ("http://w2:8000", 2), ("http://w3:8000", 5)]
        .into_iter()
        .map(|(url, load)| Arc::new(FakeWorker { url: url.into(), load }) as Arc<dyn Worker>)
        .collect();
    let prompt: Vec<u32> = (0..256).collect();
    let i = policy.select_worker(&workers, &SelectWorkerInfo { tokens: Some(&prompt) })
        .expect("an answer");
    println!("{} chose {} (load {})", policy.name(), workers[i].url(), workers[i].load());
    Ok(())
}
