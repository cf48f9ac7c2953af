// SPDX-License-Identifier: Apache-2.0
//! Links libwsel-router and libwsel-host from the installed prefix that
//! `pkg-config wsel-router` names (PKG_CONFIG_PATH), and measures the C
//! layout of every struct this crate declares by compiling a small C file
//! against the installed headers ($CC or cc): tests/layout.rs compares the
//! Rust declarations with it. No bindgen, no libclang.
use std::env;
use std::fs;
use std::path::PathBuf;
use std::process::Command;

fn pkg_config(arg: &str) -> Vec<String> {
    let out = Command::new("pkg-config")
        .args([arg, "wsel-router"])
        .output()
        .expect("wsel-sys: pkg-config not found");
    if !out.status.success() {
        panic!(
            "wsel-sys: pkg-config cannot find wsel-router.pc; install wsel \
             (cmake --install build --prefix P) and set PKG_CONFIG_PATH=P/lib/pkgconfig: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8(out.stdout).unwrap().split_whitespace().map(str::to_owned).collect()
}

/// struct name, then its fields whose offsets are checked.
const LAYOUT: &[(&str, &[&str])] = &[
    ("wsel_rng", &["state"]),
    ("wsel_request", &["request_id", "isl_tokens", "block_hashes", "rng", "overrides"]),
    ("wsel_table", &["num_rows", "topology_epoch", "worker_id", "flags", "group_row_count"]),
    ("wsel_choice", &["row", "reason", "flags", "score"]),
    ("wsel_outcome", &["dp_rank", "request_id", "ttft_us", "prompt_tokens", "flags"]),
    ("wsel_rank_state", &["overlap_blocks", "active_prefill_tokens", "active_requests", "flags"]),
    ("wsel_table_buf", &["capacity_rows", "storage"]),
    ("wsel_trust_options", &["allowed_dirs"]),
    ("wsel_host_options", &["seed", "log", "log_user", "trust", "isolated", "hang_timeout_us", "helper_path"]),
    ("wsel_host_counters", &["ejections", "fallback_by_reason_more", "log_dropped", "answers_by_reason"]),
    ("wsel_child_counters", &["name", "scores", "fallback_by_reason", "ejected"]),
    ("wsel_router_options", &["busy_prefill_tokens", "host", "log", "clock_us", "clock_user", "kv_threads"]),
    ("wsel_router_worker", &["address", "dp_size", "kv_endpoints"]),
    ("wsel_route_request", &["request_id", "tokens", "num_tokens", "isl_tokens", "text", "text_len", "overlap_score_weight", "temperature", "chat", "chat_len"]),
    ("wsel_route_result", &["worker_id", "dp_rank", "answer", "overlap_blocks", "address"]),
    ("wsel_router_finish", &["output_tokens", "cached_tokens", "ttft_us", "e2e_us"]),
    ("wsel_router_counters", &["kv_seq_gaps", "kv_skipped", "index_blocks", "epoch", "builtin_routes"]),
    ("wsel_router_kv_cpu", &["messages", "decode_ns", "apply_ns"]),
    ("wsel_router_rank_info", &["active_requests", "active_prefill_tokens", "cached_blocks", "flags"]),
];

fn main() {
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-changed=build.rs");
    for flag in pkg_config("--libs") {
        if let Some(dir) = flag.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={dir}");
        } else if let Some(lib) = flag.strip_prefix("-l") {
            println!("cargo:rustc-link-lib=dylib={lib}");
        }
    }
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    let mut c = String::from("#include <stdio.h>\n#include <stddef.h>\n#include <wsel_router.h>\nint main(void) {\n");
    c.push_str("puts(\"pub const C_LAYOUT: &[(&str, &str, usize)] = &[\");\n");
    for (ty, fields) in LAYOUT {
        c.push_str(&format!("printf(\"(\\\"{ty}\\\", \\\"\\\", %zu),\\n\", sizeof({ty}));\n"));
        for f in *fields {
            c.push_str(&format!("printf(\"(\\\"{ty}\\\", \\\"{f}\\\", %zu),\\n\", offsetof({ty}, {f}));\n"));
        }
    }
    c.push_str("puts(\"];\");\nreturn 0;\n}\n");
    fs::write(out.join("layout.c"), c).unwrap();
    let cc = env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .args(pkg_config("--cflags-only-I"))
        .arg(out.join("layout.c"))
        .arg("-o")
        .arg(out.join("layout"))
        .status()
        .expect("wsel-sys: no C compiler ($CC or cc) to measure the headers' layout");
    assert!(status.success(), "wsel-sys: compiling layout.c against the installed headers");
    let table = Command::new(out.join("layout")).output().unwrap().stdout;
    fs::write(out.join("layout.rs"), table).unwrap();
}
