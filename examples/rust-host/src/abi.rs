// SPDX-License-Identifier: Apache-2.0
//! The wsel ABI v1.0 (abi/wsel.h), declared by hand with `#[repr(C)]`.
//!
//! Every type mirrors its C struct field for field; the tests at the end pin
//! every size and offset to the numbers wsel.h pins with `_Static_assert`, so
//! a mismatch fails `cargo test` instead of corrupting memory. The C names
//! are given on each item.

// Declared whole, whether this example uses every item or not.
#![allow(dead_code)]

use std::ffi::c_void;
use std::os::raw::c_char;

pub const WSEL_ABI_MAJOR: u32 = 1;
pub const WSEL_ABI_MINOR: u32 = 0;
pub const WSEL_ENTRY_SYMBOL: &[u8] = b"wsel_plugin_entry\0";

pub const WSEL_OK: i32 = 0;
pub const WSEL_EINVAL: i32 = -1;
pub const WSEL_ENOCANDIDATE: i32 = -11;

pub const WSEL_LOG_ERROR: i32 = 0;
pub const WSEL_LOG_WARN: i32 = 1;
pub const WSEL_LOG_INFO: i32 = 2;

pub const WSEL_ROW_BUSY: u8 = 0x01;
pub const WSEL_ROW_EXCLUDED: u8 = 0x02;
pub const WSEL_ROW_NO_LOAD: u8 = 0x04;

pub const WSEL_PLUGIN_SIZE_1_0: u32 = 96;
pub const WSEL_PARAM_DEF_SIZE_1_0: u32 = 56;

/// `wsel_rng`: a random stream; plain data owned by whoever passes it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct WselRng {
    pub state: [u64; 4],
}

/// `wsel_request`: the request being routed (host-owned, valid during select).
#[repr(C)]
pub struct WselRequest {
    pub struct_size: u32,
    pub reserved0: u32,
    pub request_id: u64,
    pub affinity_key: u64,
    pub timestamp_us: u64,
    pub isl_tokens: u32,
    pub block_size: u32,
    pub num_block_hashes: u32,
    pub reserved1: u32,
    pub block_hashes: *const u64,
    pub overlap_score_weight: f64,
    pub temperature: f64,
    pub uniform: f64,
    pub rng: *mut WselRng,
}

/// `wsel_table`: the candidate table, one array per column.
#[repr(C)]
pub struct WselTable {
    pub struct_size: u32,
    pub num_rows: u32,
    pub num_groups: u32,
    pub reserved0: u32,
    pub topology_epoch: u64,
    pub worker_id: *const u64,
    pub dp_rank: *const u32,
    pub overlap_blocks: *const u32,
    pub prefill_tokens: *const u64,
    pub decode_blocks: *const u64,
    pub cost: *const f64,
    pub kv_capacity_blocks: *const u64,
    pub active_requests: *const u32,
    pub flags: *const u8,
    pub group_first_row: *const u32,
    pub group_row_count: *const u32,
}

/// `wsel_choice`: the plugin's answer.
#[repr(C)]
#[derive(Default)]
pub struct WselChoice {
    pub struct_size: u32,
    pub row: u32,
    pub reserved: [u32; 6],
}

pub type LogFn = unsafe extern "C" fn(*const WselHostApi, i32, *const c_char);
pub type RngU64Fn = unsafe extern "C" fn(*mut WselRng) -> u64;
pub type RngUniformFn = unsafe extern "C" fn(*mut WselRng) -> f64;
pub type SoftmaxSampleFn =
    unsafe extern "C" fn(*const f64, *const u8, u32, u8, f64, f64, *mut u32) -> i32;
pub type ArgminFn =
    unsafe extern "C" fn(*const f64, *const u8, u32, u8, *mut WselRng, *mut u32) -> i32;

/// `wsel_host_api`: what the host provides to a plugin. Every function
/// pointer is non-NULL in a 1.0 host, hence plain `fn` types, not `Option`.
#[repr(C)]
pub struct WselHostApi {
    pub struct_size: u32,
    pub abi_major: u32,
    pub abi_minor: u32,
    pub reserved0: u32,
    pub host_ctx: *mut c_void,
    pub log: LogFn,
    pub rng_u64: RngU64Fn,
    pub rng_uniform: RngUniformFn,
    pub softmax_sample: SoftmaxSampleFn,
    pub argmin: ArgminFn,
}

/// `wsel_param_def`: one parameter a plugin declares.
#[repr(C)]
pub struct WselParamDef {
    pub name: *const c_char,
    pub doc: *const c_char,
    pub type_: u32,
    pub reserved0: u32,
    pub default_value: f64,
    pub min_value: f64,
    pub max_value: f64,
    pub choices: *const *const c_char,
}

pub type CreateFn =
    unsafe extern "C" fn(*const WselHostApi, *const f64, u32, *mut *mut c_void) -> i32;
pub type DestroyFn = unsafe extern "C" fn(*mut c_void);
pub type SelectFn =
    unsafe extern "C" fn(*mut c_void, *const WselRequest, *const WselTable, *mut WselChoice) -> i32;
pub type RequestFinishedFn = unsafe extern "C" fn(*mut c_void, u64, u64, u32);
pub type TopologyChangedFn = unsafe extern "C" fn(*mut c_void, *const WselTable);

/// `wsel_plugin`: the descriptor a plugin exports as `wsel_plugin_entry`.
/// The optional hooks may be NULL, hence `Option`.
#[repr(C)]
pub struct WselPlugin {
    pub abi_major: u32,
    pub abi_minor: u32,
    pub struct_size: u32,
    pub capabilities: u32,
    pub name: *const c_char,
    pub version: *const c_char,
    pub description: *const c_char,
    pub params: *const WselParamDef,
    pub num_params: u32,
    pub param_def_size: u32,
    pub create: Option<CreateFn>,
    pub destroy: Option<DestroyFn>,
    pub select: Option<SelectFn>,
    pub on_request_finished: Option<RequestFinishedFn>,
    pub on_topology_changed: Option<TopologyChangedFn>,
}

// The 1.0 sizes, checked when the crate compiles.
const _: () = assert!(std::mem::size_of::<WselPlugin>() == WSEL_PLUGIN_SIZE_1_0 as usize);
const _: () = assert!(std::mem::size_of::<WselParamDef>() == WSEL_PARAM_DEF_SIZE_1_0 as usize);

#[cfg(test)]
mod layout {
    //! Every offset and size, against the numbers abi/wsel.h pins.
    use super::*;
    use std::mem::size_of;

    /// Offset of `$field` in `$type`. Rust 1.77 has `std::mem::offset_of!`;
    /// this spelling also builds with Debian 12's rustc 1.63, which CI
    /// installs when no newer cargo is present.
    macro_rules! offset_of {
        ($type:ty, $field:ident) => {{
            let value = std::mem::MaybeUninit::<$type>::uninit();
            let base = value.as_ptr();
            // SAFETY: addr_of! takes the field's address without reading it.
            let field = unsafe { std::ptr::addr_of!((*base).$field) };
            field as usize - base as usize
        }};
    }

    #[test]
    fn request_matches_the_c_layout() {
        assert_eq!(size_of::<WselRequest>(), 88);
        let pins = [
            (offset_of!(WselRequest, struct_size), 0),
            (offset_of!(WselRequest, reserved0), 4),
            (offset_of!(WselRequest, request_id), 8),
            (offset_of!(WselRequest, affinity_key), 16),
            (offset_of!(WselRequest, timestamp_us), 24),
            (offset_of!(WselRequest, isl_tokens), 32),
            (offset_of!(WselRequest, block_size), 36),
            (offset_of!(WselRequest, num_block_hashes), 40),
            (offset_of!(WselRequest, reserved1), 44),
            (offset_of!(WselRequest, block_hashes), 48),
            (offset_of!(WselRequest, overlap_score_weight), 56),
            (offset_of!(WselRequest, temperature), 64),
            (offset_of!(WselRequest, uniform), 72),
            (offset_of!(WselRequest, rng), 80),
        ];
        for (i, (got, want)) in pins.iter().enumerate() {
            assert_eq!(got, want, "wsel_request field #{i}");
        }
    }

    #[test]
    fn table_matches_the_c_layout() {
        assert_eq!(size_of::<WselTable>(), 112);
        let pins = [
            (offset_of!(WselTable, struct_size), 0),
            (offset_of!(WselTable, num_rows), 4),
            (offset_of!(WselTable, num_groups), 8),
            (offset_of!(WselTable, reserved0), 12),
            (offset_of!(WselTable, topology_epoch), 16),
            (offset_of!(WselTable, worker_id), 24),
            (offset_of!(WselTable, dp_rank), 32),
            (offset_of!(WselTable, overlap_blocks), 40),
            (offset_of!(WselTable, prefill_tokens), 48),
            (offset_of!(WselTable, decode_blocks), 56),
            (offset_of!(WselTable, cost), 64),
            (offset_of!(WselTable, kv_capacity_blocks), 72),
            (offset_of!(WselTable, active_requests), 80),
            (offset_of!(WselTable, flags), 88),
            (offset_of!(WselTable, group_first_row), 96),
            (offset_of!(WselTable, group_row_count), 104),
        ];
        for (i, (got, want)) in pins.iter().enumerate() {
            assert_eq!(got, want, "wsel_table field #{i}");
        }
    }

    #[test]
    fn choice_and_rng_match_the_c_layout() {
        assert_eq!(size_of::<WselChoice>(), 32);
        assert_eq!(offset_of!(WselChoice, row), 4);
        assert_eq!(offset_of!(WselChoice, reserved), 8);
        assert_eq!(size_of::<WselRng>(), 32);
    }

    #[test]
    fn host_api_matches_the_c_layout() {
        assert_eq!(size_of::<WselHostApi>(), 64);
        let pins = [
            (offset_of!(WselHostApi, struct_size), 0),
            (offset_of!(WselHostApi, abi_major), 4),
            (offset_of!(WselHostApi, abi_minor), 8),
            (offset_of!(WselHostApi, reserved0), 12),
            (offset_of!(WselHostApi, host_ctx), 16),
            (offset_of!(WselHostApi, log), 24),
            (offset_of!(WselHostApi, rng_u64), 32),
            (offset_of!(WselHostApi, rng_uniform), 40),
            (offset_of!(WselHostApi, softmax_sample), 48),
            (offset_of!(WselHostApi, argmin), 56),
        ];
        for (i, (got, want)) in pins.iter().enumerate() {
            assert_eq!(got, want, "wsel_host_api field #{i}");
        }
    }

    #[test]
    fn param_def_matches_the_c_layout() {
        assert_eq!(size_of::<WselParamDef>(), 56);
        let pins = [
            (offset_of!(WselParamDef, name), 0),
            (offset_of!(WselParamDef, doc), 8),
            (offset_of!(WselParamDef, type_), 16),
            (offset_of!(WselParamDef, reserved0), 20),
            (offset_of!(WselParamDef, default_value), 24),
            (offset_of!(WselParamDef, min_value), 32),
            (offset_of!(WselParamDef, max_value), 40),
            (offset_of!(WselParamDef, choices), 48),
        ];
        for (i, (got, want)) in pins.iter().enumerate() {
            assert_eq!(got, want, "wsel_param_def field #{i}");
        }
    }

    #[test]
    fn plugin_matches_the_c_layout() {
        assert_eq!(size_of::<WselPlugin>(), 96);
        let pins = [
            (offset_of!(WselPlugin, abi_major), 0),
            (offset_of!(WselPlugin, abi_minor), 4),
            (offset_of!(WselPlugin, struct_size), 8),
            (offset_of!(WselPlugin, capabilities), 12),
            (offset_of!(WselPlugin, name), 16),
            (offset_of!(WselPlugin, version), 24),
            (offset_of!(WselPlugin, description), 32),
            (offset_of!(WselPlugin, params), 40),
            (offset_of!(WselPlugin, num_params), 48),
            (offset_of!(WselPlugin, param_def_size), 52),
            (offset_of!(WselPlugin, create), 56),
            (offset_of!(WselPlugin, destroy), 64),
            (offset_of!(WselPlugin, select), 72),
            (offset_of!(WselPlugin, on_request_finished), 80),
            (offset_of!(WselPlugin, on_topology_changed), 88),
        ];
        for (i, (got, want)) in pins.iter().enumerate() {
            assert_eq!(got, want, "wsel_plugin field #{i}");
        }
        // Option<fn> is a nullable pointer: NULL hooks read as None.
        assert_eq!(size_of::<Option<SelectFn>>(), size_of::<*const c_void>());
    }
}
