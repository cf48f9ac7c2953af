// SPDX-License-Identifier: Apache-2.0
//! The host table this router hands to plugins, implemented in Rust.
//!
//! Why Rust and not libwsel-host's exported helpers: a Rust router should
//! need nothing but the ABI to load a plugin, the way a plugin needs nothing
//! but wsel.h. The helpers are small and their contracts are in wsel.h; the
//! tests below check them against that text. (A router that already links
//! libwsel-host could put `wsel_softmax_sample` and friends in the table
//! instead; examples/python-host does that.)

use crate::abi::*;
use std::ffi::CStr;
use std::os::raw::c_char;

/// Build the 1.0 host table. It must outlive every instance created with it.
pub fn host_api() -> Box<WselHostApi> {
    Box::new(WselHostApi {
        struct_size: std::mem::size_of::<WselHostApi>() as u32,
        abi_major: WSEL_ABI_MAJOR,
        abi_minor: WSEL_ABI_MINOR,
        reserved0: 0,
        host_ctx: std::ptr::null_mut(),
        log: host_log,
        rng_u64: host_rng_u64,
        rng_uniform: host_rng_uniform,
        softmax_sample: host_softmax_sample,
        argmin: host_argmin,
    })
}

/// Seed a stream (splitmix64 expansion, as libwsel-host does; never all zero).
pub fn rng_seed(seed: u64) -> WselRng {
    let mut x = seed;
    let mut next = || {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    WselRng {
        state: [next(), next(), next(), next()],
    }
}

/// xoshiro256**.
pub fn rng_next(rng: &mut WselRng) -> u64 {
    let s = &mut rng.state;
    let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
    let t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = s[3].rotate_left(45);
    result
}

pub fn rng_uniform(rng: &mut WselRng) -> f64 {
    (rng_next(rng) >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

unsafe extern "C" fn host_log(_host: *const WselHostApi, level: i32, msg: *const c_char) {
    let text = if msg.is_null() {
        "(null)".into()
    } else {
        CStr::from_ptr(msg).to_string_lossy()
    };
    let tag = match level {
        WSEL_LOG_ERROR => "error",
        WSEL_LOG_WARN => "warn",
        WSEL_LOG_INFO => "info",
        _ => "debug",
    };
    eprintln!("plugin {tag}: {text}");
}

unsafe extern "C" fn host_rng_u64(rng: *mut WselRng) -> u64 {
    rng_next(&mut *rng)
}

unsafe extern "C" fn host_rng_uniform(rng: *mut WselRng) -> f64 {
    rng_uniform(&mut *rng)
}

/// Rows that are candidates: flags absent, or no bit of `skip` set.
fn candidates<'a>(
    flags: Option<&'a [u8]>,
    n: usize,
    skip: u8,
) -> impl Iterator<Item = usize> + Clone + 'a {
    (0..n).filter(move |&i| flags.map_or(true, |f| f[i] & skip == 0))
}

/// The `k`-th row (0-based) of `rows`, for k < number of rows.
fn nth(mut rows: impl Iterator<Item = usize>, k: usize) -> u32 {
    rows.nth(k).expect("k is below the count") as u32
}

/// Index in [0, count) from a uniform draw u in [0, 1).
fn scale(u: f64, count: usize) -> usize {
    ((u * count as f64) as usize).min(count - 1)
}

/// Dynamo's softmax_sample; the contract is wsel_host_api.softmax_sample.
/// Two passes over the rows, no allocation: it runs inside a plugin's select.
pub fn softmax_sample(
    costs: &[f64],
    flags: Option<&[u8]>,
    skip: u8,
    temperature: f64,
    u: f64,
) -> Result<u32, i32> {
    if !temperature.is_finite() || temperature < 0.0 || !(0.0..1.0).contains(&u) {
        return Err(WSEL_EINVAL);
    }
    let rows = candidates(flags, costs.len(), skip);
    let count = rows.clone().count();
    if count == 0 {
        return Err(WSEL_ENOCANDIDATE);
    }
    let min = rows.clone().map(|i| costs[i]).fold(f64::INFINITY, f64::min);
    let max = rows
        .clone()
        .map(|i| costs[i])
        .fold(f64::NEG_INFINITY, f64::max);
    if temperature == 0.0 {
        let ties = rows.clone().filter(|&i| costs[i] == min);
        return Ok(nth(ties.clone(), scale(u, ties.count())));
    }
    if max == min {
        return Ok(nth(rows, scale(u, count)));
    }
    let range = max - min;
    // s_i = -(c_i / range) / T; the largest s belongs to the smallest cost.
    let s_max = -(min / range) / temperature;
    let weight = |i: usize| (-(costs[i] / range) / temperature - s_max).exp();
    let total: f64 = rows.clone().map(weight).sum();
    let mut running = 0.0;
    let mut last = 0;
    for i in rows {
        running += weight(i) / total;
        if running >= u {
            return Ok(i as u32);
        }
        last = i;
    }
    Ok(last as u32)
}

/// Argmin with exact ties broken uniformly; the contract is wsel_host_api.argmin.
pub fn argmin(
    costs: &[f64],
    flags: Option<&[u8]>,
    skip: u8,
    rng: &mut WselRng,
) -> Result<u32, i32> {
    let rows = candidates(flags, costs.len(), skip);
    let min = rows.clone().map(|i| costs[i]).fold(f64::INFINITY, f64::min);
    let ties = rows.filter(|&i| costs[i] == min);
    let count = ties.clone().count();
    if count == 0 {
        return Err(WSEL_ENOCANDIDATE);
    }
    // Multiply-high maps 64 random bits onto [0, count) with a bias below 2^-50.
    let k = ((rng_next(rng) as u128 * count as u128) >> 64) as usize;
    Ok(nth(ties, k))
}

// The C entry points: the ABI allows no unwinding, so nothing here may panic
// across the boundary (slices are built only after the NULL checks).

unsafe fn slices<'a>(costs: *const f64, flags: *const u8, n: u32) -> (&'a [f64], Option<&'a [u8]>) {
    let n = n as usize;
    let flags = if flags.is_null() {
        None
    } else {
        Some(std::slice::from_raw_parts(flags, n))
    };
    (std::slice::from_raw_parts(costs, n), flags)
}

unsafe extern "C" fn host_softmax_sample(
    costs: *const f64,
    flags: *const u8,
    n: u32,
    skip: u8,
    temperature: f64,
    u: f64,
    out_row: *mut u32,
) -> i32 {
    if costs.is_null() || out_row.is_null() {
        return WSEL_EINVAL;
    }
    let (costs, flags) = slices(costs, flags, n);
    match softmax_sample(costs, flags, skip, temperature, u) {
        Ok(row) => {
            *out_row = row;
            WSEL_OK
        }
        Err(code) => code,
    }
}

unsafe extern "C" fn host_argmin(
    costs: *const f64,
    flags: *const u8,
    n: u32,
    skip: u8,
    rng: *mut WselRng,
    out_row: *mut u32,
) -> i32 {
    if costs.is_null() || rng.is_null() || out_row.is_null() {
        return WSEL_EINVAL;
    }
    let (costs, flags) = slices(costs, flags, n);
    match argmin(costs, flags, skip, &mut *rng) {
        Ok(row) => {
            *out_row = row;
            WSEL_OK
        }
        Err(code) => code,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temperature_zero_takes_the_minimum() {
        assert_eq!(softmax_sample(&[3.0, 1.0, 2.0], None, 0, 0.0, 0.99), Ok(1));
    }

    #[test]
    fn temperature_zero_ties_split_by_u() {
        let costs = [1.0, 5.0, 1.0];
        assert_eq!(softmax_sample(&costs, None, 0, 0.0, 0.1), Ok(0));
        assert_eq!(softmax_sample(&costs, None, 0, 0.0, 0.9), Ok(2));
    }

    #[test]
    fn skipped_rows_are_never_chosen() {
        let flags = [WSEL_ROW_EXCLUDED, 0, 0];
        assert_eq!(
            softmax_sample(&[0.0, 2.0, 1.0], Some(&flags), WSEL_ROW_EXCLUDED, 0.0, 0.5),
            Ok(2)
        );
        let all = [WSEL_ROW_EXCLUDED; 3];
        assert_eq!(
            softmax_sample(&[0.0; 3], Some(&all), WSEL_ROW_EXCLUDED, 1.0, 0.5),
            Err(WSEL_ENOCANDIDATE)
        );
    }

    #[test]
    fn bad_temperature_or_draw_is_refused() {
        assert_eq!(softmax_sample(&[1.0], None, 0, -1.0, 0.5), Err(WSEL_EINVAL));
        assert_eq!(
            softmax_sample(&[1.0], None, 0, f64::NAN, 0.5),
            Err(WSEL_EINVAL)
        );
        assert_eq!(softmax_sample(&[1.0], None, 0, 1.0, 1.0), Err(WSEL_EINVAL));
    }

    #[test]
    fn softmax_follows_the_range_normalised_weights() {
        // Two rows, costs 0 and 1, T = 1: s = (0, -1), so p0 = 1 / (1 + e^-1)
        // = 0.7311. Any u up to p0 picks row 0, anything above picks row 1.
        let p0 = 1.0 / (1.0 + (-1.0f64).exp());
        assert_eq!(softmax_sample(&[0.0, 1.0], None, 0, 1.0, p0 - 1e-9), Ok(0));
        assert_eq!(softmax_sample(&[0.0, 1.0], None, 0, 1.0, p0 + 1e-9), Ok(1));
        // Scaling costs changes nothing: only the range-normalised gap counts.
        assert_eq!(softmax_sample(&[0.0, 1e-6], None, 0, 1.0, p0 - 1e-9), Ok(0));
        assert_eq!(softmax_sample(&[0.0, 1e-6], None, 0, 1.0, p0 + 1e-9), Ok(1));
    }

    #[test]
    fn argmin_breaks_ties_between_the_minima_only() {
        let mut rng = rng_seed(42);
        let mut seen = [0u32; 4];
        for _ in 0..200 {
            seen[argmin(&[2.0, 1.0, 3.0, 1.0], None, 0, &mut rng).unwrap() as usize] += 1;
        }
        // Each of the two minima is drawn with p = 1/2: 200 draws give a mean
        // of 100 and a standard deviation of sqrt(200/4) = 7.1; 60 is over
        // five deviations away, a false alarm below 1e-6 (and the seed is fixed).
        assert_eq!(seen[0] + seen[2], 0);
        assert!(seen[1] > 60 && seen[3] > 60, "{seen:?}");
    }

    #[test]
    fn uniform_draws_stay_in_the_unit_interval() {
        let mut rng = rng_seed(7);
        for _ in 0..1000 {
            let u = rng_uniform(&mut rng);
            assert!((0.0..1.0).contains(&u));
        }
    }
}
