// SPDX-License-Identifier: Apache-2.0
//! Safe Rust binding of libwsel-host and libwsel-router.
//!
//! Ownership is RAII: a [`Host`], [`Router`] or [`Table`] frees its C
//! object when dropped. The headers' thread rules map to Rust so:
//!
//! * [`Host`] is `Send + Sync`. `select`, `request_finished`,
//!   `request_outcome` and `counters` are `[any thread]` and take `&self`;
//!   the `[control thread]` calls (`switch`, `reclaim`, `topology_changed`,
//!   `policy_name`) also take `&self` but hold a mutex of the host's, so
//!   "one control thread at a time" holds while selects go on beside a
//!   switch, never waiting for it. Destroy ("no select may be running")
//!   is `Drop`, which the borrow checker runs only once no `&Host` is left.
//! * [`Router`] is `Send + Sync` (every call `[any thread]`); it keeps an
//!   `Arc<Host>`, so the host outlives it as the header requires.
//! * [`Request`] and [`Table`] are per-request scratch: `Send + Sync`,
//!   rebuilt through `&mut`; select takes `&mut Request` because the
//!   plugin advances the request's random stream.
//!
//! Errors are [`Error`]: the WSEL_E* code, its name and the host's message.
use std::ffi::{CStr, CString};
use std::fmt;
use std::os::raw::c_char;
use std::path::Path;
use std::ptr::{self, NonNull};
use std::sync::Mutex;
use std::cell::UnsafeCell;

pub use wsel_sys as sys;
pub use sys::wsel_rank_state as RankState;
pub use sys::{WSEL_ROW_BUSY as ROW_BUSY, WSEL_ROW_EXCLUDED as ROW_EXCLUDED,
              WSEL_ROW_NO_LOAD as ROW_NO_LOAD};

const ERR_SIZE: usize = 512;

/// A negative WSEL_E* code with the host's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub code: i32,
    pub name: &'static str,
    pub message: String,
}

impl Error {
    fn new(code: i32, message: String) -> Error {
        let name = unsafe { static_str(sys::wsel_errname(code)) };
        let message = if message.is_empty() {
            unsafe { static_str(sys::wsel_strerror(code)) }.to_owned()
        } else {
            message
        };
        Error { code, name, message }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.name, self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// # Safety
/// `p` is one of the library's static strings.
unsafe fn static_str(p: *const c_char) -> &'static str {
    CStr::from_ptr(p).to_str().unwrap_or("?")
}

/// The caller's message buffer of a C call (written through `ptr`).
struct ErrBuf(UnsafeCell<[c_char; ERR_SIZE]>);

impl ErrBuf {
    fn new() -> ErrBuf {
        ErrBuf(UnsafeCell::new([0; ERR_SIZE]))
    }
    fn ptr(&self) -> *mut c_char {
        self.0.get().cast()
    }
    fn check(&self, rc: i32) -> Result<i32> {
        if rc >= 0 {
            return Ok(rc);
        }
        let msg = unsafe { CStr::from_ptr(self.ptr()) }.to_string_lossy().into_owned();
        Err(Error::new(rc, msg))
    }
}

fn check(rc: i32) -> Result<i32> {
    if rc < 0 { Err(Error::new(rc, String::new())) } else { Ok(rc) }
}

fn cstring(s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::new(sys::WSEL_EINVAL, format!("NUL byte in {s:?}")))
}

// --- requests and tables ------------------------------------------------------

/// What a request carries besides its id (wsel_request's inputs).
#[derive(Debug, Clone)]
pub struct RequestSpec {
    pub request_id: u64,
    pub isl_tokens: u32,
    pub block_size: u32,
    pub block_hashes: Vec<u64>,
    pub overlap_score_weight: f64,
    /// This request's own temperature (0 included), or the policy's.
    pub temperature: Option<f64>,
    pub affinity_key: u64,
    pub timestamp_us: u64,
}

impl RequestSpec {
    pub fn new(request_id: u64, isl_tokens: u32) -> RequestSpec {
        RequestSpec {
            request_id,
            isl_tokens,
            block_size: 64,
            block_hashes: Vec::new(),
            overlap_score_weight: 1.0,
            temperature: None,
            affinity_key: 0,
            timestamp_us: 0,
        }
    }
}

struct RequestInner {
    req: sys::wsel_request,
    rng: sys::wsel_rng,
    hashes: Vec<u64>,
}

/// A request prepared by a host (its random stream seeded from the host's
/// seed and the request id). Boxed: the C struct points into it.
pub struct Request(Box<RequestInner>);

// SAFETY: the raw pointers point into the request's own box and vector;
// shared references only read them.
unsafe impl Send for Request {}
unsafe impl Sync for Request {}

impl Request {
    pub fn request_id(&self) -> u64 {
        self.0.req.request_id
    }
    pub fn uniform(&self) -> f64 {
        self.0.req.uniform
    }
    /// WSEL_EREQUEST with the field named if the request is invalid.
    pub fn validate(&self) -> Result<()> {
        let err = ErrBuf::new();
        err.check(unsafe { sys::wsel_request_validate(&self.0.req, err.ptr(), ERR_SIZE) })
            .map(drop)
    }
}

/// A candidate table: columns allocated once (`capacity` rows), rebuilt
/// per request. Dropping it frees the columns.
pub struct Table {
    buf: Box<sys::wsel_table_buf>,
}

// SAFETY: the buffer owns its columns; shared references only read them.
unsafe impl Send for Table {}
unsafe impl Sync for Table {}

impl Table {
    pub fn new(capacity: u32) -> Result<Table> {
        let mut buf: Box<sys::wsel_table_buf> = Box::new(unsafe { std::mem::zeroed() });
        check(unsafe { sys::wsel_table_buf_init(&mut *buf, capacity) })?;
        Ok(Table { buf })
    }

    /// Fill the columns from rank states in canonical order (worker_id,
    /// then dp_rank); WSEL_ETABLE names the offending rank.
    pub fn build(&mut self, request: &Request, ranks: &[RankState], epoch: u64) -> Result<()> {
        let n = u32::try_from(ranks.len())
            .map_err(|_| Error::new(sys::WSEL_ERANGE, "too many ranks".into()))?;
        let err = ErrBuf::new();
        let rc = unsafe {
            sys::wsel_table_build(&mut *self.buf, &request.0.req, ranks.as_ptr(), n, epoch,
                                  err.ptr(), ERR_SIZE)
        };
        err.check(rc).map(drop)
    }

    pub fn len(&self) -> usize {
        self.buf.table.num_rows as usize
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn column<T: Copy>(&self, col: *const T, row: usize) -> T {
        assert!(row < self.len(), "row {row} out of range");
        unsafe { *col.add(row) }
    }
    /// (worker_id, dp_rank) of `row`.
    pub fn worker(&self, row: usize) -> (u64, u32) {
        let t = &self.buf.table;
        (self.column(t.worker_id, row), self.column(t.dp_rank, row))
    }
    /// Dynamo's default cost of `row`.
    pub fn cost(&self, row: usize) -> f64 {
        self.column(self.buf.table.cost, row)
    }
    pub fn validate(&self) -> Result<()> {
        let err = ErrBuf::new();
        err.check(unsafe { sys::wsel_table_validate(&self.buf.table, err.ptr(), ERR_SIZE) })
            .map(drop)
    }
    /// The C table, for callers mixing this crate with wsel-sys.
    pub fn as_raw(&self) -> &sys::wsel_table {
        &self.buf.table
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        unsafe { sys::wsel_table_buf_free(&mut *self.buf) }
    }
}

/// Who produced an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Plugin,
    Fallback,
}

/// A select's answer with the plugin's explanation (ABI 1.1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Choice {
    pub row: usize,
    pub worker_id: u64,
    pub dp_rank: u32,
    pub answer: Answer,
    /// WSEL_REASON_* (0: none given).
    pub reason: u32,
    /// The chosen row's score when the plugin gave one.
    pub score: Option<f64>,
}

/// What a finished request cost, told to the policy.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub request_id: u64,
    pub worker_id: u64,
    pub dp_rank: u32,
    pub ttft_us: u64,
    pub e2e_us: u64,
    pub finished_us: u64,
    pub prompt_tokens: u32,
    pub cached_tokens: u32,
    pub output_tokens: u32,
    pub failed: bool,
}

/// The host's counters (wsel_host_counters), fallbacks by reason name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostCounters {
    pub selects: u64,
    pub plugin_answers: u64,
    pub fallbacks: u64,
    pub fallback_by_reason: Vec<(&'static str, u64)>,
    pub switches: u64,
    pub failed_switches: u64,
    pub ejections: u64,
    pub log_dropped: u64,
    pub answers_by_reason: [u64; sys::WSEL_HOST_REASON_SLOTS],
}

/// One child of the live policy (a pipeline's scorer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildCounters {
    pub depth: u32,
    pub name: String,
    pub scores: u64,
    pub answers: u64,
    pub fallbacks: u64,
    pub ejected: bool,
}

// --- the host ----------------------------------------------------------------------

/// Options of [`Host::new`]; `Default` is the host's defaults.
#[derive(Debug, Clone, Default)]
pub struct HostOptions {
    pub seed: u64,
    /// 0: the default (16); `sys::WSEL_HOST_NEVER_EJECT`: never.
    pub max_consecutive_failures: u32,
    /// Folders a plugin must live in; None: any.
    pub allowed_dirs: Option<Vec<String>>,
    /// Run each policy in its own helper process (docs/isolated.md).
    pub isolated: bool,
    pub select_deadline_us: u32,
    pub helper_path: Option<String>,
}

/// A live policy with fallback, switching and counters.
pub struct Host {
    ptr: NonNull<sys::wsel_host>,
    control: Mutex<()>,
}

// SAFETY: wsel_host_h's thread rules: any-thread calls take &self as they
// are; control-thread calls are serialised by `control`; destroy is Drop.
unsafe impl Send for Host {}
unsafe impl Sync for Host {}

impl Host {
    pub fn new(options: &HostOptions) -> Result<Host> {
        let mut opts: sys::wsel_host_options = unsafe { std::mem::zeroed() };
        unsafe { sys::wsel_host_options_default(&mut opts) };
        opts.seed = options.seed;
        if options.max_consecutive_failures != 0 {
            opts.max_consecutive_failures = options.max_consecutive_failures;
        }
        let dirs: Vec<CString> = options.allowed_dirs.iter().flatten()
            .map(|d| cstring(d)).collect::<Result<_>>()?;
        let mut dir_ptrs: Vec<*const c_char> = dirs.iter().map(|d| d.as_ptr()).collect();
        dir_ptrs.push(ptr::null());
        if options.allowed_dirs.is_some() {
            opts.trust.allowed_dirs = dir_ptrs.as_ptr();
        }
        opts.isolated = options.isolated as u32;
        opts.select_deadline_us = options.select_deadline_us;
        let helper = options.helper_path.as_deref().map(cstring).transpose()?;
        if let Some(h) = &helper {
            opts.helper_path = h.as_ptr();
        }
        let mut out = ptr::null_mut();
        check(unsafe { sys::wsel_host_create(&opts, &mut out) })?; // copies the options
        let ptr = NonNull::new(out).ok_or_else(|| Error::new(sys::WSEL_EINVAL, String::new()))?;
        Ok(Host { ptr, control: Mutex::new(()) })
    }

    fn raw(&self) -> *mut sys::wsel_host {
        self.ptr.as_ptr()
    }

    fn control(&self) -> std::sync::MutexGuard<'_, ()> {
        self.control.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Load the plugin at `path` with JSON `config` and make it live; on
    /// error the old policy keeps serving and the error says why.
    pub fn switch(&self, path: impl AsRef<Path>, config: Option<&str>) -> Result<()> {
        let path = path.as_ref().to_str()
            .ok_or_else(|| Error::new(sys::WSEL_EINVAL, "path is not UTF-8".into()))?;
        let path = cstring(path)?;
        let config = config.map(cstring).transpose()?;
        let cfg = config.as_ref().map_or(ptr::null(), |c| c.as_ptr());
        let err = ErrBuf::new();
        let _g = self.control();
        err.check(unsafe { sys::wsel_host_switch(self.raw(), path.as_ptr(), cfg, err.ptr(),
                                                 ERR_SIZE) }).map(drop)
    }

    /// Destroy replaced instances past their grace; how many live on.
    pub fn reclaim(&self) -> u32 {
        let _g = self.control();
        unsafe { sys::wsel_host_reclaim(self.raw()) }
    }

    /// The live policy's name ("builtin" when none or ejected).
    pub fn policy_name(&self) -> String {
        let _g = self.control();
        unsafe { CStr::from_ptr(sys::wsel_host_policy_name(self.raw())) }
            .to_string_lossy().into_owned()
    }

    /// A request prepared by this host. [any thread]
    pub fn request(&self, spec: RequestSpec) -> Request {
        let mut inner = Box::new(RequestInner {
            req: unsafe { std::mem::zeroed() },
            rng: sys::wsel_rng::default(),
            hashes: spec.block_hashes,
        });
        let r = &mut *inner;
        r.req.request_id = spec.request_id;
        unsafe {
            sys::wsel_host_prepare_request_sized(self.raw(), &mut r.req,
                                                 std::mem::size_of::<sys::wsel_request>(),
                                                 &mut r.rng)
        };
        r.req.isl_tokens = spec.isl_tokens;
        r.req.block_size = spec.block_size;
        r.req.overlap_score_weight = spec.overlap_score_weight;
        r.req.affinity_key = spec.affinity_key;
        r.req.timestamp_us = spec.timestamp_us;
        if let Some(t) = spec.temperature {
            r.req.temperature = t;
            r.req.overrides |= sys::WSEL_OVERRIDE_TEMPERATURE;
        }
        r.req.num_block_hashes = r.hashes.len() as u32;
        r.req.block_hashes = if r.hashes.is_empty() { ptr::null() } else { r.hashes.as_ptr() };
        Request(inner)
    }

    /// Choose a row of `table` for `request`. [any thread]
    pub fn select(&self, request: &mut Request, table: &Table) -> Result<Choice> {
        let mut c = sys::wsel_choice {
            struct_size: std::mem::size_of::<sys::wsel_choice>() as u32,
            ..Default::default()
        };
        let rc = unsafe { sys::wsel_host_select(self.raw(), &request.0.req, &table.buf.table,
                                                &mut c) };
        check(rc)?;
        let row = c.row as usize;
        let (worker_id, dp_rank) = table.worker(row);
        Ok(Choice {
            row,
            worker_id,
            dp_rank,
            answer: if rc == sys::WSEL_ANSWER_PLUGIN { Answer::Plugin } else { Answer::Fallback },
            reason: c.reason,
            score: (c.flags & sys::WSEL_CHOICE_SCORED != 0).then_some(c.score),
        })
    }

    pub fn request_finished(&self, request_id: u64, worker_id: u64, dp_rank: u32) {
        unsafe { sys::wsel_host_request_finished(self.raw(), request_id, worker_id, dp_rank) }
    }

    /// Tell the live policy a request finished and what it cost.
    pub fn request_outcome(&self, o: &Outcome) {
        let c = sys::wsel_outcome {
            struct_size: std::mem::size_of::<sys::wsel_outcome>() as u32,
            dp_rank: o.dp_rank,
            request_id: o.request_id,
            worker_id: o.worker_id,
            ttft_us: o.ttft_us,
            e2e_us: o.e2e_us,
            finished_us: o.finished_us,
            prompt_tokens: o.prompt_tokens,
            cached_tokens: o.cached_tokens,
            output_tokens: o.output_tokens,
            flags: if o.failed { sys::WSEL_OUTCOME_FAILED } else { 0 },
        };
        unsafe { sys::wsel_host_request_outcome(self.raw(), &c) }
    }

    pub fn topology_changed(&self, table: &Table) {
        let _g = self.control();
        unsafe { sys::wsel_host_topology_changed(self.raw(), &table.buf.table) }
    }

    pub fn counters(&self) -> HostCounters {
        let mut c = sys::wsel_host_counters::default();
        unsafe { sys::wsel_host_read_counters(self.raw(), &mut c,
                                              std::mem::size_of_val(&c)) };
        let base = sys::WSEL_FALLBACK_REASONS;
        let fallback_by_reason = (0..sys::WSEL_FALLBACK_REASONS_MAX)
            .map(|r| (r, if r < base { c.fallback_by_reason[r] }
                         else { c.fallback_by_reason_more[r - base] }))
            .filter(|(_, n)| *n != 0)
            .map(|(r, n)| (unsafe { static_str(sys::wsel_fallback_reason_name(r as u32)) }, n))
            .collect();
        HostCounters {
            selects: c.selects,
            plugin_answers: c.plugin_answers,
            fallbacks: c.fallbacks,
            fallback_by_reason,
            switches: c.switches,
            failed_switches: c.failed_switches,
            ejections: c.ejections,
            log_dropped: c.log_dropped,
            answers_by_reason: c.answers_by_reason,
        }
    }

    /// The live policy's children, depth first.
    pub fn child_counters(&self) -> Result<Vec<ChildCounters>> {
        let mut out = Vec::new();
        loop {
            let mut c: sys::wsel_child_counters = unsafe { std::mem::zeroed() };
            c.struct_size = std::mem::size_of_val(&c) as u32;
            let rc = unsafe { sys::wsel_host_read_child_counters(self.raw(), out.len() as u32,
                                                                 &mut c, std::mem::size_of_val(&c)) };
            if rc == sys::WSEL_ENOENT {
                return Ok(out);
            }
            check(rc)?;
            out.push(ChildCounters {
                depth: c.depth,
                name: unsafe { CStr::from_ptr(c.name.as_ptr()) }.to_string_lossy().into_owned(),
                scores: c.scores,
                answers: c.answers,
                fallbacks: c.fallbacks,
                ejected: c.ejected != 0,
            });
        }
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        unsafe { sys::wsel_host_destroy(self.raw()) }
    }
}

mod router;
pub use router::*;
