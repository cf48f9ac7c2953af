// SPDX-License-Identifier: Apache-2.0
//! The safe binding against the installed libraries and plugins
//! (WSEL_PLUGIN_DIR, set by tests/bindings/run_binding.sh).
use std::path::PathBuf;
use std::sync::Arc;
use std::thread;

use wsel::{Answer, Finish, Host, HostOptions, Prompt, RankState, RequestSpec, RouteOptions,
           Router, RouterOptions, Table};

fn plugin(name: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("WSEL_PLUGIN_DIR")?;
    Some(PathBuf::from(dir).join(format!("{name}.so")))
}

macro_rules! plugin_or_skip {
    ($name:expr) => {
        match plugin($name) {
            Some(p) => p,
            None => {
                eprintln!("WSEL_PLUGIN_DIR not set: skipped");
                return;
            }
        }
    };
}

fn rank(worker_id: u64, dp_rank: u32, active_blocks: u64) -> RankState {
    RankState { worker_id, dp_rank, active_blocks, ..Default::default() }
}

/// Row 2 (worker 11, rank 0) is the unique cheapest.
fn ranks() -> Vec<RankState> {
    vec![rank(10, 0, 50), rank(10, 1, 40), rank(11, 0, 5)]
}

fn spec(id: u64) -> RequestSpec {
    RequestSpec { block_size: 16, ..RequestSpec::new(id, 256) }
}

#[test]
fn builtin_policy_answers_before_any_switch() {
    let host = Host::new(&HostOptions::default()).unwrap();
    let mut req = host.request(spec(1));
    let mut table = Table::new(4).unwrap();
    table.build(&req, &ranks(), 1).unwrap();
    let c = host.select(&mut req, &table).unwrap();
    assert_eq!((c.answer, c.worker_id, c.dp_rank), (Answer::Fallback, 11, 0));
    assert_eq!(host.policy_name(), "builtin");
    assert_eq!(host.counters().fallback_by_reason, vec![("no_policy", 1)]);
}

#[test]
fn switch_by_path_makes_the_plugin_answer_and_explain() {
    let path = plugin_or_skip!("softmax");
    let host = Host::new(&HostOptions { seed: 7, ..Default::default() }).unwrap();
    host.switch(&path, Some(r#"{"temperature": 0}"#)).unwrap();
    assert_eq!(host.policy_name(), "softmax");
    let mut req = host.request(spec(2));
    let mut table = Table::new(4).unwrap();
    table.build(&req, &ranks(), 1).unwrap();
    let c = host.select(&mut req, &table).unwrap();
    assert_eq!((c.answer, c.row, c.reason), (Answer::Plugin, 2, 1));
    assert_eq!(c.score, Some(table.cost(2)));
    let k = host.counters();
    assert_eq!((k.selects, k.plugin_answers, k.switches, k.answers_by_reason[1]), (1, 1, 1, 1));
}

#[test]
fn refused_switch_carries_the_hosts_message() {
    let path = plugin_or_skip!("softmax");
    let host = Host::new(&HostOptions::default()).unwrap();
    let e = host.switch(&path, Some(r#"{"no_such_key": 1}"#)).unwrap_err();
    assert_eq!(e.name, "WSEL_ECONFIG");
    assert!(e.message.contains("no_such_key"), "{e}");
    let e = host.switch(path.with_file_name("missing.so"), None).unwrap_err();
    assert!(e.to_string().contains("missing.so"), "{e}");
    assert_eq!(host.counters().failed_switches, 2);
}

#[test]
fn table_out_of_order_is_refused_with_the_rank_named() {
    let host = Host::new(&HostOptions::default()).unwrap();
    let req = host.request(spec(3));
    let mut table = Table::new(2).unwrap();
    let e = table.build(&req, &[rank(2, 0, 0), rank(1, 0, 0)], 1).unwrap_err();
    assert_eq!(e.name, "WSEL_ETABLE");
    assert!(e.message.contains("ranks[1]"), "{e}");
}

#[test]
fn outcomes_and_children_reach_the_policy() {
    let softmax = plugin_or_skip!("softmax");
    let host = Host::new(&HostOptions::default()).unwrap();
    let cfg = format!(r#"{{"scorers": [{{"path": "{}"}}]}}"#, softmax.display());
    host.switch(softmax.with_file_name("pipeline.so"), Some(&cfg)).unwrap();
    let names: Vec<String> = host.child_counters().unwrap().into_iter().map(|c| c.name).collect();
    assert!(names.iter().any(|n| n == "softmax"), "{names:?}");
    let mut req = host.request(spec(4));
    let mut table = Table::new(4).unwrap();
    table.build(&req, &ranks(), 1).unwrap();
    let c = host.select(&mut req, &table).unwrap();
    host.request_finished(4, c.worker_id, c.dp_rank);
    host.request_outcome(&wsel::Outcome { request_id: 4, worker_id: c.worker_id,
                                          dp_rank: c.dp_rank, ttft_us: 900,
                                          ..Default::default() });
    host.topology_changed(&table);
}

#[test]
fn threads_select_while_another_switches() {
    let path = plugin_or_skip!("softmax");
    let host = Arc::new(Host::new(&HostOptions::default()).unwrap());
    host.switch(&path, None).unwrap();
    let workers: Vec<_> = (0..4u64)
        .map(|k| {
            let host = Arc::clone(&host);
            thread::spawn(move || {
                let mut table = Table::new(4).unwrap();
                for i in 0..300 {
                    let mut req = host.request(spec(k * 1000 + i));
                    table.build(&req, &ranks(), 1).unwrap();
                    assert_eq!(host.select(&mut req, &table).unwrap().row, 2);
                }
            })
        })
        .collect();
    for _ in 0..5 {
        host.switch(&path, Some(r#"{"temperature": 0}"#)).unwrap();
    }
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(host.counters().selects, 1200);
}

#[test]
fn router_routes_accounts_and_remembers_history() {
    let path = plugin_or_skip!("softmax");
    let host = Arc::new(Host::new(&HostOptions::default()).unwrap());
    host.switch(&path, None).unwrap();
    let router = Router::new(Arc::clone(&host), &RouterOptions { block_size: 16,
                                                                ..Default::default() }).unwrap();
    router.add_worker(1, "127.0.0.1:8001", 2, None).unwrap();
    router.add_worker(2, "127.0.0.1:8002", 1, None).unwrap();
    assert_eq!(router.epoch(), 3);
    assert_eq!(router.add_worker(1, "x", 1, None).unwrap_err().name, "WSEL_ESTATE");
    let prompt: Vec<u32> = (0..128).collect();
    let first = router.route(Prompt::Tokens(&prompt), &RouteOptions::default()).unwrap();
    assert_eq!((first.num_blocks, first.answer), (8, Answer::Plugin));
    let busy = router.ranks().into_iter().find(|r| r.active_requests == 1).unwrap();
    assert_eq!((busy.worker_id, busy.dp_rank), (first.worker_id, first.dp_rank));
    router.first_token(first.request_id).unwrap();
    router.finished(first.request_id, &Finish { output_tokens: 5, ..Default::default() }).unwrap();
    let again = router.route(Prompt::Tokens(&prompt), &RouteOptions::default()).unwrap();
    assert_eq!((again.worker_id, again.dp_rank, again.overlap_blocks),
               (first.worker_id, first.dp_rank, 8));
    let text = router.route(Prompt::Text(&"hello ".repeat(50), 0),
                            &RouteOptions { temperature: Some(0.0), builtin: true,
                                            ..Default::default() }).unwrap();
    assert_eq!(text.answer, Answer::Fallback);
    router.drain_worker(2).unwrap();
    router.set_worker_available(1, false).unwrap();
    let e = router.route(Prompt::Tokens(&prompt), &RouteOptions::default()).unwrap_err();
    assert_eq!(e.name, "WSEL_ENOCANDIDATE");
    let k = router.counters();
    assert_eq!((k.routes, k.builtin_routes, k.no_candidate), (3, 1, 1));
    assert!(router.apply_kv_message(1, 0, &[b"kv"]).is_err());
    assert_eq!(router.counters().kv_skipped[0], 1); // WSEL_KV_SKIP_FRAMES
    assert!(router.kv_cpu().unwrap().messages >= 1);
}

#[test]
fn hashes_are_chained_per_full_block() {
    let toks: Vec<u32> = (0..40).collect();
    let h = wsel::hash_tokens(&toks, 16);
    assert_eq!(h.len(), 2);
    assert_eq!(h, wsel::hash_tokens(&toks[..32], 16));
    assert_eq!(wsel::hash_text(&"x".repeat(100), 32).len(), 3);
    assert_eq!(wsel::kv_skip_name(0), "frames");
}

#[test]
fn bindings_are_send_and_sync_as_the_headers_allow() {
    fn both<T: Send + Sync>() {}
    both::<Host>();
    both::<Router>();
    both::<Table>();
    both::<wsel::Request>();
}

#[test]
fn the_libraries_loaded_are_the_installed_ones() {
    let Some(prefix) = std::env::var_os("WSEL_PREFIX") else {
        eprintln!("WSEL_PREFIX not set: skipped");
        return;
    };
    let _host = Host::new(&HostOptions::default()).unwrap(); // the libraries are in use
    let real = std::fs::canonicalize(prefix).unwrap();
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let libs: Vec<&str> = maps.lines().filter_map(|l| l.split_whitespace().nth(5))
        .filter(|p| p.contains("libwsel-")).collect();
    assert!(libs.iter().any(|p| p.contains("libwsel-host.so")), "{libs:?}");
    assert!(libs.iter().any(|p| p.contains("libwsel-router.so")), "{libs:?}");
    for p in &libs {
        assert!(std::fs::canonicalize(p).unwrap().starts_with(&real), "{p} is not under {real:?}");
    }
}
