// SPDX-License-Identifier: Apache-2.0
//! select_bench PLUGIN ROWS ITERATIONS -- Host::select through the Rust
//! binding, each call timed with Instant; prints "rust p50_ns p99_ns"
//! (bindings/bench/run.sh).
use std::time::Instant;

use wsel::{Host, HostOptions, RankState, RequestSpec, Table};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (rows, iters): (u32, usize) = (args[2].parse().unwrap(), args[3].parse().unwrap());
    let host = Host::new(&HostOptions::default()).unwrap();
    host.switch(&args[1], None).unwrap();
    let ranks: Vec<RankState> = (0..rows)
        .map(|i| RankState { worker_id: i as u64, active_blocks: (i as u64 * 7919) % 1000,
                             ..Default::default() })
        .collect();
    let mut req = host.request(RequestSpec::new(1, 1024));
    let mut table = Table::new(rows).unwrap();
    table.build(&req, &ranks, 1).unwrap();
    for _ in 0..iters / 10 {
        host.select(&mut req, &table).unwrap();
    }
    let mut ns: Vec<u64> = (0..iters)
        .map(|_| {
            let t0 = Instant::now();
            host.select(&mut req, &table).unwrap();
            t0.elapsed().as_nanos() as u64
        })
        .collect();
    ns.sort_unstable();
    println!("rust {} {}", ns[iters / 2], ns[iters * 99 / 100]);
}
