// SPDX-License-Identifier: Apache-2.0
//! route PLUGIN_DIR -- route two requests with the bundled softmax policy
//! through libwsel-router, then select on a table of one's own
//! (docs/integrations.md).
use std::sync::Arc;

use wsel::{Finish, Host, HostOptions, Prompt, RankState, RequestSpec, RouteOptions, Router,
           RouterOptions, Table};

fn main() -> Result<(), wsel::Error> {
    let plugins = std::env::args().nth(1).expect("usage: route PLUGIN_DIR");
    let host = Arc::new(Host::new(&HostOptions { seed: 42, ..Default::default() })?);
    host.switch(format!("{plugins}/softmax.so"), Some(r#"{"temperature": 0}"#))?;

    let router = Router::new(Arc::clone(&host), &RouterOptions { block_size: 16,
                                                                ..Default::default() })?;
    router.add_worker(1, "127.0.0.1:8001", 2, None)?;
    router.add_worker(2, "127.0.0.1:8002", 1, None)?;
    let prompt: Vec<u32> = (0..128).collect();
    for _ in 0..2 {
        let res = router.route(Prompt::Tokens(&prompt), &RouteOptions::default())?;
        println!("to {} rank {} cached {}", res.address, res.dp_rank, res.overlap_blocks);
        router.first_token(res.request_id)?;
        router.finished(res.request_id, &Finish { output_tokens: 32, ..Default::default() })?;
    }

    // Or without the router: your own table of ranks, the host selects.
    let mut req = host.request(RequestSpec { block_size: 16, ..RequestSpec::new(7, 512) });
    let mut table = Table::new(8)?;
    table.build(&req, &[RankState { worker_id: 1, active_blocks: 30, ..Default::default() },
                        RankState { worker_id: 1, dp_rank: 1, active_blocks: 2,
                                    ..Default::default() }], 1)?;
    let c = host.select(&mut req, &table)?;
    println!("row {} worker {} rank {} reason {} score {:?}", c.row, c.worker_id, c.dp_rank,
             c.reason, c.score);
    Ok(())
}
