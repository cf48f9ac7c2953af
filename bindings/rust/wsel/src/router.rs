// SPDX-License-Identifier: Apache-2.0
//! libwsel-router over a [`Host`]: topology, KV index, load and route.
use std::ffi::{c_void, CStr, CString};
use std::os::raw::c_char;
use std::ptr::{self, NonNull};
use std::sync::Arc;

use crate::{check, cstring, static_str, sys, Answer, ErrBuf, Error, Host, Result, ERR_SIZE};

/// Options of [`Router::new`]; zero fields are the router's defaults.
#[derive(Debug, Clone, Default)]
pub struct RouterOptions {
    pub block_size: u32,
    /// KV events from each rank (true) or routing history (false).
    pub kv_events: bool,
    pub max_rows: u32,
    pub capacity_blocks: u32,
    pub text_chunk_chars: u32,
    pub busy_active_requests: u32,
    pub max_prompt_blocks: u32,
    pub busy_prefill_tokens: u64,
    /// The caller's CPU class for the KV threads instead of SCHED_BATCH.
    pub kv_threads_normal: bool,
}

/// The prompt of a route: token ids (exact blocks) or text (approximate).
#[derive(Debug, Clone, Copy)]
pub enum Prompt<'a> {
    Tokens(&'a [u32]),
    /// Text and its length in tokens (0: len / 4).
    Text(&'a str, u32),
    /// A /v1/chat/completions body (JSON), tokenized by the router's
    /// tokenizer when it has one, else hashed as text.
    Chat(&'a str),
}

/// One route's inputs besides its prompt.
#[derive(Debug, Clone, Copy, Default)]
pub struct RouteOptions {
    /// 0: the router assigns one.
    pub request_id: u64,
    pub overlap_score_weight: Option<f64>,
    pub temperature: Option<f64>,
    /// Answer with the host's built-in rule without asking the policy.
    pub builtin: bool,
    /// History mode: record the prompt at the next flush.
    pub defer_history: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteResult {
    pub request_id: u64,
    pub worker_id: u64,
    pub dp_rank: u32,
    pub answer: Answer,
    pub num_blocks: u32,
    pub overlap_blocks: u32,
    pub address: String,
}

/// How a request ended (wsel_router_finish); `Default`: unknown.
#[derive(Debug, Clone, Copy, Default)]
pub struct Finish {
    pub failed: bool,
    pub output_tokens: u32,
    pub cached_tokens: Option<u32>,
    pub ttft_us: u64,
    pub e2e_us: u64,
}

pub use sys::wsel_router_counters as RouterCounters;
pub use sys::wsel_router_kv_cpu as KvCpu;
pub use sys::wsel_router_rank_info as RankInfo;

/// libwsel-router. Dropping it stops its KV threads and frees it.
pub struct Router {
    ptr: NonNull<sys::wsel_router>,
    _host: Arc<Host>,
}

// SAFETY: wsel_router.h: every call but create/destroy is [any thread]
// (one internal mutex); destroy is Drop.
unsafe impl Send for Router {}
unsafe impl Sync for Router {}

impl Router {
    pub fn new(host: Arc<Host>, o: &RouterOptions) -> Result<Router> {
        let opts = sys::wsel_router_options {
            struct_size: std::mem::size_of::<sys::wsel_router_options>() as u32,
            block_size: o.block_size,
            kv_source: if o.kv_events { sys::WSEL_ROUTER_KV_EVENTS } else { sys::WSEL_ROUTER_KV_HISTORY },
            max_rows: o.max_rows,
            capacity_blocks: o.capacity_blocks,
            text_chunk_chars: o.text_chunk_chars,
            busy_active_requests: o.busy_active_requests,
            max_prompt_blocks: o.max_prompt_blocks,
            busy_prefill_tokens: o.busy_prefill_tokens,
            host: host.raw(),
            log: None,
            log_user: ptr::null_mut(),
            clock_us: None,
            clock_user: ptr::null_mut(),
            kv_threads: if o.kv_threads_normal { sys::WSEL_ROUTER_KV_THREADS_NORMAL } else { sys::WSEL_ROUTER_KV_THREADS_LOW },
        };
        let mut out = ptr::null_mut();
        let err = ErrBuf::new();
        err.check(unsafe { sys::wsel_router_create(&opts, &mut out, err.ptr(), ERR_SIZE) })?;
        let ptr = NonNull::new(out).ok_or_else(|| Error::new(sys::WSEL_EINVAL, String::new()))?;
        Ok(Router { ptr, _host: host })
    }

    fn raw(&self) -> *mut sys::wsel_router {
        self.ptr.as_ptr()
    }

    /// Add a worker of `dp_size` ranks; `kv_endpoints` one per rank.
    pub fn add_worker(&self, worker_id: u64, address: &str, dp_size: u32,
                      kv_endpoints: Option<&[&str]>) -> Result<()> {
        let addr = cstring(address)?;
        let eps: Vec<CString> = kv_endpoints.into_iter().flatten()
            .map(|e| cstring(e)).collect::<Result<_>>()?;
        let ep_ptrs: Vec<*const c_char> = eps.iter().map(|e| e.as_ptr()).collect();
        let w = sys::wsel_router_worker {
            worker_id,
            address: addr.as_ptr(),
            dp_size,
            kv_endpoints: if kv_endpoints.is_some() { ep_ptrs.as_ptr() } else { ptr::null() },
        };
        let err = ErrBuf::new();
        err.check(unsafe { sys::wsel_router_add_worker(self.raw(), &w, err.ptr(), ERR_SIZE) })
            .map(drop)
    }

    pub fn drain_worker(&self, worker_id: u64) -> Result<()> {
        check(unsafe { sys::wsel_router_drain_worker(self.raw(), worker_id) }).map(drop)
    }
    pub fn remove_worker(&self, worker_id: u64) -> Result<()> {
        check(unsafe { sys::wsel_router_remove_worker(self.raw(), worker_id) }).map(drop)
    }
    pub fn set_worker_available(&self, worker_id: u64, available: bool) -> Result<()> {
        check(unsafe { sys::wsel_router_set_worker_available(self.raw(), worker_id,
                                                             available as i32) }).map(drop)
    }
    pub fn epoch(&self) -> u64 {
        unsafe { sys::wsel_router_epoch(self.raw()) }
    }

    /// Route one request and account it as started on the chosen rank.
    pub fn route(&self, prompt: Prompt<'_>, o: &RouteOptions) -> Result<RouteResult> {
        let mut r = sys::wsel_route_request {
            struct_size: std::mem::size_of::<sys::wsel_route_request>() as u32,
            overrides: 0,
            request_id: o.request_id,
            tokens: ptr::null(),
            num_tokens: 0,
            isl_tokens: 0,
            text: ptr::null(),
            text_len: 0,
            overlap_score_weight: o.overlap_score_weight.unwrap_or(1.0),
            temperature: o.temperature.unwrap_or(0.0),
            chat: ptr::null(),
            chat_len: 0,
        };
        match prompt {
            Prompt::Tokens(t) => {
                r.tokens = t.as_ptr();
                r.num_tokens = u32::try_from(t.len())
                    .map_err(|_| Error::new(sys::WSEL_ERANGE, "prompt too long".into()))?;
            }
            Prompt::Text(s, isl) => {
                r.text = s.as_ptr().cast();
                r.text_len = s.len();
                r.isl_tokens = isl;
            }
            Prompt::Chat(s) => {
                r.chat = s.as_ptr().cast();
                r.chat_len = s.len();
            }
        }
        let flags = [(o.overlap_score_weight.is_some(), sys::WSEL_ROUTE_SET_WEIGHT),
                     (o.temperature.is_some(), sys::WSEL_ROUTE_SET_TEMPERATURE),
                     (o.builtin, sys::WSEL_ROUTE_BUILTIN),
                     (o.defer_history, sys::WSEL_ROUTE_DEFER_HISTORY)];
        for (on, bit) in flags {
            if on {
                r.overrides |= bit;
            }
        }
        let mut res: sys::wsel_route_result = unsafe { std::mem::zeroed() };
        check(unsafe { sys::wsel_router_route(self.raw(), &r, &mut res) })?;
        Ok(RouteResult {
            request_id: res.request_id,
            worker_id: res.worker_id,
            dp_rank: res.dp_rank,
            answer: if res.answer == sys::WSEL_ANSWER_PLUGIN as u32 { Answer::Plugin } else { Answer::Fallback },
            num_blocks: res.num_blocks,
            overlap_blocks: res.overlap_blocks,
            address: unsafe { CStr::from_ptr(res.address.as_ptr()) }.to_string_lossy().into_owned(),
        })
    }

    pub fn flush(&self) {
        unsafe { sys::wsel_router_flush(self.raw()) }
    }
    pub fn first_token(&self, request_id: u64) -> Result<()> {
        check(unsafe { sys::wsel_router_first_token(self.raw(), request_id) }).map(drop)
    }
    /// The request ended: its load leaves the rank, the policy gets its outcome.
    pub fn finished(&self, request_id: u64, f: &Finish) -> Result<()> {
        let mut info = sys::wsel_router_finish {
            struct_size: std::mem::size_of::<sys::wsel_router_finish>() as u32,
            flags: if f.failed { sys::WSEL_ROUTER_FINISH_FAILED } else { 0 },
            output_tokens: f.output_tokens,
            cached_tokens: 0,
            ttft_us: f.ttft_us,
            e2e_us: f.e2e_us,
        };
        if let Some(c) = f.cached_tokens {
            info.flags |= sys::WSEL_ROUTER_FINISH_CACHED_KNOWN;
            info.cached_tokens = c;
        }
        check(unsafe { sys::wsel_router_finished_ex(self.raw(), request_id, &info) }).map(drop)
    }

    /// Apply one KV event message (topic, sequence, msgpack batch).
    pub fn apply_kv_message(&self, worker_id: u64, dp_rank: u32, frames: &[&[u8]]) -> Result<()> {
        let ptrs: Vec<*const c_void> = frames.iter().map(|f| f.as_ptr().cast()).collect();
        let sizes: Vec<usize> = frames.iter().map(|f| f.len()).collect();
        check(unsafe { sys::wsel_router_apply_kv_message(self.raw(), worker_id, dp_rank,
                                                         ptrs.as_ptr(), sizes.as_ptr(),
                                                         frames.len() as u32) }).map(drop)
    }

    pub fn counters(&self) -> RouterCounters {
        let mut c = RouterCounters::default();
        unsafe { sys::wsel_router_read_counters(self.raw(), &mut c) };
        c
    }
    pub fn kv_cpu(&self) -> Result<KvCpu> {
        let mut k = KvCpu { struct_size: std::mem::size_of::<KvCpu>() as u32, ..Default::default() };
        check(unsafe { sys::wsel_router_read_kv_cpu(self.raw(), &mut k) })?;
        Ok(k)
    }
    /// Every row, canonical order, as the next route would see it.
    pub fn ranks(&self) -> Vec<RankInfo> {
        let mut n = unsafe { sys::wsel_router_read_ranks(self.raw(), ptr::null_mut(), 0) };
        loop {
            let mut v = vec![RankInfo::default(); n as usize];
            let got = unsafe { sys::wsel_router_read_ranks(self.raw(), v.as_mut_ptr(), n) };
            if got <= n {
                v.truncate(got as usize);
                return v;
            }
            n = got;
        }
    }
}

impl Drop for Router {
    fn drop(&mut self) {
        unsafe { sys::wsel_router_destroy(self.raw()) }
    }
}

/// Name of a WSEL_KV_SKIP_* reason (an index of RouterCounters::kv_skipped).
pub fn kv_skip_name(reason: u32) -> &'static str {
    unsafe { static_str(sys::wsel_router_kv_skip_name(reason)) }
}

/// Dynamo-compatible chained XXH3 hashes of the full blocks of `tokens`.
pub fn hash_tokens(tokens: &[u32], block_size: u32) -> Vec<u64> {
    let n = if block_size == 0 { 0 } else { tokens.len() / block_size as usize };
    let mut out = vec![0u64; n];
    let got = unsafe { sys::wsel_router_hash_tokens(tokens.as_ptr(), tokens.len() as u32,
                                                    block_size, out.as_mut_ptr(), n as u32) };
    out.truncate(got as usize);
    out
}

/// The same over `chunk`-byte chunks of text.
pub fn hash_text(text: &str, chunk: u32) -> Vec<u64> {
    let n = if chunk == 0 { 0 } else { text.len() / chunk as usize };
    let mut out = vec![0u64; n];
    let got = unsafe { sys::wsel_router_hash_text(text.as_ptr().cast(), text.len(), chunk,
                                                  out.as_mut_ptr(), n as u32) };
    out.truncate(got as usize);
    out
}
