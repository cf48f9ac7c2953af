// SPDX-License-Identifier: Apache-2.0
//! Load a plugin with dlopen/dlsym, check its descriptor, create instances.
//!
//! The checks are the ones a wsel host makes before running plugin code:
//! the ABI major, the descriptor's struct_size (at least the 1.0 size), the
//! required functions and the parameter table's stride.

use crate::abi::*;
use std::ffi::{c_void, CStr, CString};
use std::os::raw::{c_char, c_int};

// dlopen and friends are in glibc's libc since 2.34 (which std links) and in
// libdl before; naming libdl keeps older systems working.
#[cfg_attr(target_os = "linux", link(name = "dl"))]
extern "C" {
    fn dlopen(filename: *const c_char, flags: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    fn dlerror() -> *mut c_char;
}
const RTLD_NOW: c_int = 2;
const RTLD_LOCAL: c_int = 0;

/// A loaded plugin. The shared object is never dlclose'd (see DESIGN.md,
/// "Runtime switching"), so the descriptor stays valid for the process.
pub struct Library {
    pub path: String,
    entry: &'static WselPlugin,
}

/// One parameter as this host reads it from the plugin's table.
pub struct Param {
    pub name: String,
    pub default_value: f64,
}

unsafe fn text(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

fn last_dl_error() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string it owns.
    unsafe { text(dlerror()) }
}

impl Library {
    pub fn open(path: &str) -> Result<Library, String> {
        let cpath = CString::new(path).map_err(|_| format!("{path}: path contains NUL"))?;
        // SAFETY: plain C calls with NUL-terminated strings.
        let handle = unsafe { dlopen(cpath.as_ptr(), RTLD_NOW | RTLD_LOCAL) };
        if handle.is_null() {
            return Err(format!("dlopen: {}", last_dl_error()));
        }
        let sym = unsafe { dlsym(handle, WSEL_ENTRY_SYMBOL.as_ptr() as *const c_char) };
        if sym.is_null() {
            return Err(format!("{path}: no symbol wsel_plugin_entry"));
        }
        // Read the three leading u32 (major, minor, struct_size) before
        // trusting the rest of the descriptor.
        let head = sym as *const u32;
        let (major, minor, size) = unsafe { (*head, *head.add(1), *head.add(2)) };
        if major != WSEL_ABI_MAJOR {
            return Err(format!(
                "{path}: ABI major {major}, this host speaks {WSEL_ABI_MAJOR}"
            ));
        }
        if size < WSEL_PLUGIN_SIZE_1_0 {
            return Err(format!(
                "{path}: descriptor of {size} bytes, shorter than 1.0's {WSEL_PLUGIN_SIZE_1_0}"
            ));
        }
        // SAFETY: at least the 1.0 size is there; a newer (longer) descriptor
        // keeps the 1.0 fields at the same offsets and we ignore its tail.
        let entry: &'static WselPlugin = unsafe { &*(sym as *const WselPlugin) };
        if entry.create.is_none() || entry.destroy.is_none() || entry.select.is_none() {
            return Err(format!("{path}: create, destroy and select are required"));
        }
        if entry.num_params > 0
            && (entry.params.is_null() || entry.param_def_size < WSEL_PARAM_DEF_SIZE_1_0)
        {
            return Err(format!(
                "{path}: parameter table missing or its stride {} too short",
                entry.param_def_size
            ));
        }
        let _ = minor; // any minor of our major is accepted
        Ok(Library {
            path: path.to_string(),
            entry,
        })
    }

    pub fn name(&self) -> String {
        unsafe { text(self.entry.name) }
    }

    pub fn abi_version(&self) -> (u32, u32) {
        (self.entry.abi_major, self.entry.abi_minor)
    }

    /// The parameter table, read with the plugin's own stride.
    pub fn params(&self) -> Vec<Param> {
        let base = self.entry.params as *const u8;
        (0..self.entry.num_params as usize)
            .map(|i| {
                // SAFETY: checked in open(): num_params entries of param_def_size bytes.
                let def = unsafe {
                    &*(base.add(i * self.entry.param_def_size as usize) as *const WselParamDef)
                };
                Param {
                    name: unsafe { text(def.name) },
                    default_value: def.default_value,
                }
            })
            .collect()
    }

    /// Create an instance with `values` (one per parameter, in table order).
    /// `host` must outlive the instance.
    pub fn create<'a>(
        &'a self,
        host: &'a WselHostApi,
        values: &[f64],
    ) -> Result<Instance<'a>, String> {
        if values.len() != self.entry.num_params as usize {
            return Err(format!(
                "{}: {} values for {} parameters",
                self.path,
                values.len(),
                self.entry.num_params
            ));
        }
        let mut instance = std::ptr::null_mut();
        let create = self.entry.create.unwrap();
        // SAFETY: the contract of wsel_plugin.create; values outlive the call.
        let rc = unsafe { create(host, values.as_ptr(), values.len() as u32, &mut instance) };
        if rc != WSEL_OK {
            return Err(format!("{}: create failed with {rc}", self.path));
        }
        Ok(Instance {
            lib: self,
            instance,
            _host: host,
        })
    }
}

/// A live plugin instance; destroyed on drop.
pub struct Instance<'a> {
    lib: &'a Library,
    instance: *mut c_void,
    _host: &'a WselHostApi,
}

impl Instance<'_> {
    /// Ask the plugin, then check its answer the way a wsel host does.
    pub fn select(&self, request: &WselRequest, table: &WselTable) -> Result<u32, String> {
        let mut choice = WselChoice {
            struct_size: std::mem::size_of::<WselChoice>() as u32,
            ..Default::default()
        };
        let select = self.lib.entry.select.unwrap();
        // SAFETY: request and table are valid for the call; choice is ours.
        let rc = unsafe { select(self.instance, request, table, &mut choice) };
        if rc != WSEL_OK {
            return Err(format!("select failed with {rc}"));
        }
        if choice.row >= table.num_rows {
            return Err(format!(
                "row {} out of range (table has {} rows)",
                choice.row, table.num_rows
            ));
        }
        // SAFETY: row < num_rows and flags has num_rows entries.
        if unsafe { *table.flags.add(choice.row as usize) } & WSEL_ROW_EXCLUDED != 0 {
            return Err(format!("row {} is excluded", choice.row));
        }
        Ok(choice.row)
    }
}

impl Drop for Instance<'_> {
    fn drop(&mut self) {
        let destroy = self.lib.entry.destroy.unwrap();
        // SAFETY: created by this library's create, destroyed once.
        unsafe { destroy(self.instance) };
    }
}
