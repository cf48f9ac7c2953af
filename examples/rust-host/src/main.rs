// SPDX-License-Identifier: Apache-2.0
//! wsel-rust-host: the shape a Rust router (such as Dynamo's kv_router)
//! would use to call a wsel plugin.
//!
//!     wsel-rust-host PLUGIN.so
//!
//! Loads the plugin, creates it with its defaults, fills a table of
//! (worker, dp_rank) rows with Dynamo's default cost, asks it for a few
//! requests and prints each answer.

mod abi;
mod host_api;
mod plugin;

use abi::*;
use std::process::ExitCode;

/// What the router knows about one (worker, dp_rank).
struct Rank {
    worker_id: u64,
    dp_rank: u32,
    overlap_blocks: u32,
    active_prefill_tokens: u64,
    active_blocks: u64,
    active_requests: u32,
    flags: u8,
}

/// The columns of a wsel_table, owned by the router and reused per request.
#[derive(Default)]
struct Columns {
    worker_id: Vec<u64>,
    dp_rank: Vec<u32>,
    overlap_blocks: Vec<u32>,
    prefill_tokens: Vec<u64>,
    decode_blocks: Vec<u64>,
    cost: Vec<f64>,
    kv_capacity_blocks: Vec<u64>,
    active_requests: Vec<u32>,
    flags: Vec<u8>,
    group_first_row: Vec<u32>,
    group_row_count: Vec<u32>,
}

impl Columns {
    /// Dynamo's cost: weight * prefill_tokens / block_size + decode_blocks.
    /// `ranks` must be in canonical order (worker_id, then dp_rank).
    fn fill(&mut self, ranks: &[Rank], isl: u32, block_size: u32, weight: f64) {
        *self = Columns::default();
        let request_blocks = (isl / block_size) as u64;
        for (row, r) in ranks.iter().enumerate() {
            let cached = r.overlap_blocks as u64 * block_size as u64;
            let prefill = (isl as u64).saturating_sub(cached) + r.active_prefill_tokens;
            let decode = r.active_blocks + request_blocks.saturating_sub(r.overlap_blocks as u64);
            self.worker_id.push(r.worker_id);
            self.dp_rank.push(r.dp_rank);
            self.overlap_blocks.push(r.overlap_blocks);
            self.prefill_tokens.push(prefill);
            self.decode_blocks.push(decode);
            self.cost
                .push(weight * prefill as f64 / block_size as f64 + decode as f64);
            self.kv_capacity_blocks.push(16384);
            self.active_requests.push(r.active_requests);
            self.flags.push(r.flags);
            if row == 0 || ranks[row - 1].worker_id != r.worker_id {
                self.group_first_row.push(row as u32);
                self.group_row_count.push(0);
            }
            *self.group_row_count.last_mut().unwrap() += 1;
        }
    }

    /// A wsel_table pointing into these columns; valid while they are.
    fn table(&self, epoch: u64) -> WselTable {
        WselTable {
            struct_size: std::mem::size_of::<WselTable>() as u32,
            num_rows: self.cost.len() as u32,
            num_groups: self.group_first_row.len() as u32,
            reserved0: 0,
            topology_epoch: epoch,
            worker_id: self.worker_id.as_ptr(),
            dp_rank: self.dp_rank.as_ptr(),
            overlap_blocks: self.overlap_blocks.as_ptr(),
            prefill_tokens: self.prefill_tokens.as_ptr(),
            decode_blocks: self.decode_blocks.as_ptr(),
            cost: self.cost.as_ptr(),
            kv_capacity_blocks: self.kv_capacity_blocks.as_ptr(),
            active_requests: self.active_requests.as_ptr(),
            flags: self.flags.as_ptr(),
            group_first_row: self.group_first_row.as_ptr(),
            group_row_count: self.group_row_count.as_ptr(),
        }
    }
}

fn rank(
    worker_id: u64,
    dp_rank: u32,
    overlap_blocks: u32,
    active_blocks: u64,
    active_requests: u32,
) -> Rank {
    Rank {
        worker_id,
        dp_rank,
        overlap_blocks,
        active_prefill_tokens: 0,
        active_blocks,
        active_requests,
        flags: 0,
    }
}

fn run(path: &str) -> Result<(), String> {
    let lib = plugin::Library::open(path)?;
    let (major, minor) = lib.abi_version();
    let params = lib.params();
    let defaults: Vec<f64> = params.iter().map(|p| p.default_value).collect();
    let names: Vec<String> = params
        .iter()
        .map(|p| format!("{}={}", p.name, p.default_value))
        .collect();
    println!(
        "loaded {} (ABI {major}.{minor}) from {path}; defaults: {}",
        lib.name(),
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    );

    let host = host_api::host_api();
    let instance = lib.create(&host, &defaults)?;

    // Three workers with two dp ranks each; worker 11 rank 1 holds the
    // request's whole prefix. Worker 12 rank 1 is draining (excluded).
    let mut ranks = vec![
        rank(10, 0, 0, 40, 3),
        rank(10, 1, 0, 42, 3),
        rank(11, 0, 1, 10, 1),
        rank(11, 1, 4, 12, 1),
        rank(12, 0, 0, 5, 0),
        rank(12, 1, 0, 0, 0),
    ];
    ranks[5].flags = WSEL_ROW_EXCLUDED;
    let mut columns = Columns::default();
    let block_hashes = [0x11u64, 0x22, 0x33, 0x44];
    for request_id in 1..=3u64 {
        let (isl, block_size) = (64u32, 16u32);
        columns.fill(&ranks, isl, block_size, 1.0);
        let table = columns.table(1);
        let mut rng = host_api::rng_seed(0x5eed ^ request_id.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let uniform = host_api::rng_uniform(&mut rng);
        let request = WselRequest {
            struct_size: std::mem::size_of::<WselRequest>() as u32,
            reserved0: 0,
            request_id,
            affinity_key: 0,
            timestamp_us: request_id * 1000,
            isl_tokens: isl,
            block_size,
            num_block_hashes: block_hashes.len() as u32,
            reserved1: 0,
            block_hashes: block_hashes.as_ptr(),
            overlap_score_weight: 1.0,
            temperature: 0.0,
            uniform,
            rng: &mut rng,
        };
        let row = instance.select(&request, &table)? as usize;
        println!(
            "request {request_id}: row {row} = worker {} dp_rank {} (cost {})",
            columns.worker_id[row], columns.dp_rank[row], columns.cost[row]
        );
        // The router routes it there: the rank gets busier.
        ranks[row].active_requests += 1;
        ranks[row].active_blocks += (isl / block_size) as u64;
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 2 {
        eprintln!("usage: wsel-rust-host PLUGIN.so");
        return ExitCode::from(2);
    }
    match run(&args[1]) {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("wsel-rust-host: {msg}");
            ExitCode::FAILURE
        }
    }
}
