// SPDX-License-Identifier: Apache-2.0
// The shared library's SONAME, so that what links it records the name,
// not the build path.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libwsel_tokenizer.so");
}
