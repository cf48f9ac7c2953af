// SPDX-License-Identifier: Apache-2.0
//! The C ABI of ../include/wsel_tokenizer.h: HF `tokenizers` for token ids,
//! `minijinja` for chat templates rendered the way `transformers`'
//! `apply_chat_template` renders them (trim_blocks, lstrip_blocks, loop
//! controls, Python string methods, a Python-compatible `tojson`,
//! `raise_exception`). Every entry point catches panics.

mod pyjson;
mod pystr;

use std::ffi::{c_char, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use minijinja::{Environment, Error, ErrorKind, Value};
use tokenizers::Tokenizer;

// The error codes of wsel_tokenizer.h (WSEL_TOKENIZER_ERRORS).
const E_INVAL: i32 = -1;
const E_NOENT: i32 = -2;
const E_FORMAT: i32 = -3;
const E_NOTEMPLATE: i32 = -4;
const E_TEMPLATE: i32 = -5;
const E_UTF8: i32 = -6;
const E_RANGE: i32 = -7;
const E_ENCODE: i32 = -8;
const E_INTERNAL: i32 = -9;

const ADD_SPECIAL: u32 = 0x1;

/// The special-token names `transformers` passes to a chat template.
const SPECIAL_NAMES: [&str; 7] = [
    "bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token",
];

pub struct WselTokenizer {
    tk: Tokenizer,
    env: Environment<'static>,
    has_template: bool,
    specials: serde_json::Map<String, serde_json::Value>,
}

struct Failure(i32, String);

fn fail<T>(code: i32, msg: impl Into<String>) -> Result<T, Failure> {
    Err(Failure(code, msg.into()))
}

unsafe fn write_err(err: *mut c_char, err_size: usize, msg: &str) {
    if err.is_null() || err_size == 0 {
        return;
    }
    let bytes = msg.as_bytes();
    let mut n = bytes.len().min(err_size - 1);
    while n > 0 && !msg.is_char_boundary(n) {
        n -= 1;
    }
    std::ptr::copy_nonoverlapping(bytes.as_ptr(), err as *mut u8, n);
    *err.add(n) = 0;
}

/// Runs `f`, turning a panic into E_INTERNAL and a Failure into its code
/// with its message in `err`.
unsafe fn guarded<F>(err: *mut c_char, err_size: usize, f: F) -> i32
where
    F: FnOnce() -> Result<(), Failure>,
{
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => 0,
        Ok(Err(Failure(code, msg))) => {
            write_err(err, err_size, &msg);
            code
        }
        Err(_) => {
            write_err(err, err_size, "internal error (panic in the tokenizer shim)");
            E_INTERNAL
        }
    }
}

fn read_json(path: &Path) -> Result<serde_json::Value, Failure> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => return fail(E_NOENT, format!("{}: {}", path.display(), e)),
    };
    serde_json::from_str(&text).or_else(|e| fail(E_FORMAT, format!("{}: {}", path.display(), e)))
}

/// A special token as tokenizer_config.json writes it: a string or an
/// AddedToken object with its `content`.
fn token_text(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Object(o) => o.get("content").and_then(|c| c.as_str()).map(String::from),
        _ => None,
    }
}

/// The chat template: chat_template.jinja beside the config if present,
/// else the config's `chat_template` (a string, or a list of named
/// templates of which "default" is taken).
fn chat_template(dir: &Path, config: &serde_json::Value) -> Result<Option<String>, Failure> {
    let jinja = dir.join("chat_template.jinja");
    if jinja.exists() {
        return std::fs::read_to_string(&jinja)
            .map(Some)
            .or_else(|e| fail(E_NOENT, format!("{}: {}", jinja.display(), e)));
    }
    match config.get("chat_template") {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
        Some(serde_json::Value::Array(list)) => Ok(list
            .iter()
            .find(|t| t.get("name").and_then(|n| n.as_str()) == Some("default"))
            .and_then(|t| t.get("template"))
            .and_then(|t| t.as_str())
            .map(String::from)),
        Some(_) => fail(E_FORMAT, "tokenizer_config.json: chat_template is neither a string nor a list"),
    }
}

fn raise_exception(msg: String) -> Result<Value, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, msg))
}

fn template_env(source: Option<String>) -> Result<Environment<'static>, Failure> {
    let mut env = Environment::new();
    let syntax = minijinja::syntax::SyntaxConfig::builder()
        .trim_blocks(true)
        .lstrip_blocks(true)
        .build()
        .or_else(|e| fail(E_INTERNAL, e.to_string()))?;
    env.set_syntax(syntax);
    env.set_unknown_method_callback(pystr::unknown_method);
    env.add_filter("trim", pystr::trim_filter);
    env.add_filter("tojson", pyjson::tojson_filter);
    env.add_function("raise_exception", raise_exception);
    if let Some(src) = source {
        env.add_template_owned("chat", src)
            .or_else(|e| fail(E_TEMPLATE, format!("chat template: {:#}", e)))?;
    }
    Ok(env)
}

fn open(dir: &Path) -> Result<WselTokenizer, Failure> {
    let tk_path = dir.join("tokenizer.json");
    if !tk_path.exists() {
        return fail(E_NOENT, format!("{}: no such file", tk_path.display()));
    }
    let mut tk = Tokenizer::from_file(&tk_path)
        .or_else(|e| fail(E_FORMAT, format!("{}: {}", tk_path.display(), e)))?;
    tk.with_truncation(None).or_else(|e| fail(E_FORMAT, e.to_string()))?;
    tk.with_padding(None);
    let cfg_path = dir.join("tokenizer_config.json");
    let config = if cfg_path.exists() { read_json(&cfg_path)? } else { serde_json::json!({}) };
    let mut specials = serde_json::Map::new();
    for name in SPECIAL_NAMES {
        if let Some(text) = config.get(name).and_then(token_text) {
            specials.insert(name.to_string(), serde_json::Value::String(text));
        }
    }
    let source = chat_template(dir, &config)?;
    let has_template = source.is_some();
    Ok(WselTokenizer { tk, env: template_env(source)?, has_template, specials })
}

/// The rendering context `transformers` builds: messages, tools,
/// documents, add_generation_prompt, the special tokens, then every
/// field of `chat_template_kwargs`.
fn render(t: &WselTokenizer, body: &[u8]) -> Result<String, Failure> {
    if !t.has_template {
        return fail(E_NOTEMPLATE, "the model's files carry no chat template");
    }
    let req: serde_json::Value =
        serde_json::from_slice(body).or_else(|e| fail(E_FORMAT, format!("chat request: {}", e)))?;
    let Some(obj) = req.as_object() else {
        return fail(E_FORMAT, "chat request: not a JSON object");
    };
    let Some(messages) = obj.get("messages").filter(|m| m.is_array()) else {
        return fail(E_FORMAT, "chat request: no \"messages\" array");
    };
    let null = serde_json::Value::Null;
    let mut ctx = serde_json::Map::new();
    ctx.insert("messages".into(), messages.clone());
    ctx.insert("tools".into(), obj.get("tools").unwrap_or(&null).clone());
    ctx.insert("documents".into(), obj.get("documents").unwrap_or(&null).clone());
    let agp = obj.get("add_generation_prompt").and_then(|v| v.as_bool()).unwrap_or(true);
    ctx.insert("add_generation_prompt".into(), serde_json::Value::Bool(agp));
    for (k, v) in &t.specials {
        ctx.insert(k.clone(), v.clone());
    }
    if let Some(serde_json::Value::Object(kw)) = obj.get("chat_template_kwargs") {
        for (k, v) in kw {
            ctx.insert(k.clone(), v.clone());
        }
    }
    let tmpl = t.env.get_template("chat").or_else(|e| fail(E_INTERNAL, e.to_string()))?;
    tmpl.render(Value::from(minijinja::value::Serde(&ctx)))
        .or_else(|e| fail(E_TEMPLATE, format!("chat template: {:#}", e)))
}

fn encode(t: &WselTokenizer, text: &str, add_special: bool) -> Result<Vec<u32>, Failure> {
    match t.tk.encode_fast(text, add_special) {
        Ok(enc) => Ok(enc.get_ids().to_vec()),
        Err(e) => fail(E_ENCODE, e.to_string()),
    }
}

/// Copies `ids` out when they fit; sets *n either way.
unsafe fn put_ids(got: &[u32], ids: *mut u32, cap: usize, n: *mut usize) -> Result<(), Failure> {
    *n = got.len();
    if got.len() > cap {
        return fail(E_RANGE, format!("{} ids do not fit in {}", got.len(), cap));
    }
    if !got.is_empty() {
        std::ptr::copy_nonoverlapping(got.as_ptr(), ids, got.len());
    }
    Ok(())
}

unsafe fn bytes<'a>(p: *const c_char, len: usize) -> Option<&'a [u8]> {
    if p.is_null() {
        return if len == 0 { Some(&[]) } else { None };
    }
    Some(std::slice::from_raw_parts(p as *const u8, len))
}

#[no_mangle]
pub unsafe extern "C" fn wsel_tokenizer_open(
    dir: *const c_char,
    out: *mut *mut WselTokenizer,
    err: *mut c_char,
    err_size: usize,
) -> i32 {
    guarded(err, err_size, || {
        if dir.is_null() || out.is_null() {
            return fail(E_INVAL, "NULL argument");
        }
        let Ok(dir) = CStr::from_ptr(dir).to_str() else {
            return fail(E_INVAL, "the folder's name is not UTF-8");
        };
        let t = open(Path::new(dir))?;
        *out = Box::into_raw(Box::new(t));
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn wsel_tokenizer_close(t: *mut WselTokenizer) {
    if !t.is_null() {
        let _ = catch_unwind(AssertUnwindSafe(|| drop(Box::from_raw(t))));
    }
}

#[no_mangle]
pub unsafe extern "C" fn wsel_tokenizer_has_chat_template(t: *const WselTokenizer) -> i32 {
    (!t.is_null() && (*t).has_template) as i32
}

#[no_mangle]
pub unsafe extern "C" fn wsel_tokenizer_encode(
    t: *const WselTokenizer,
    text: *const c_char,
    len: usize,
    flags: u32,
    ids: *mut u32,
    cap: usize,
    n: *mut usize,
) -> i32 {
    guarded(std::ptr::null_mut(), 0, || {
        let Some(raw) = bytes(text, len) else { return fail(E_INVAL, "") };
        if t.is_null() || n.is_null() || (ids.is_null() && cap > 0) || flags & !ADD_SPECIAL != 0 {
            return fail(E_INVAL, "");
        }
        let Ok(s) = std::str::from_utf8(raw) else { return fail(E_UTF8, "") };
        let got = encode(&*t, s, flags & ADD_SPECIAL != 0)?;
        put_ids(&got, ids, cap, n)
    })
}

#[no_mangle]
pub unsafe extern "C" fn wsel_tokenizer_render_chat(
    t: *const WselTokenizer,
    json: *const c_char,
    len: usize,
    out: *mut c_char,
    cap: usize,
    n: *mut usize,
    err: *mut c_char,
    err_size: usize,
) -> i32 {
    guarded(err, err_size, || {
        let Some(body) = bytes(json, len) else { return fail(E_INVAL, "NULL request") };
        if t.is_null() || n.is_null() || (out.is_null() && cap > 0) {
            return fail(E_INVAL, "NULL argument");
        }
        let text = render(&*t, body)?;
        *n = text.len();
        if text.len() >= cap {
            return fail(E_RANGE, format!("{} bytes and a NUL do not fit in {}", text.len(), cap));
        }
        std::ptr::copy_nonoverlapping(text.as_ptr(), out as *mut u8, text.len());
        *out.add(text.len()) = 0;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn wsel_tokenizer_encode_chat(
    t: *const WselTokenizer,
    json: *const c_char,
    len: usize,
    ids: *mut u32,
    cap: usize,
    n: *mut usize,
    err: *mut c_char,
    err_size: usize,
) -> i32 {
    guarded(err, err_size, || {
        let Some(body) = bytes(json, len) else { return fail(E_INVAL, "NULL request") };
        if t.is_null() || n.is_null() || (ids.is_null() && cap > 0) {
            return fail(E_INVAL, "NULL argument");
        }
        let text = render(&*t, body)?;
        let got = encode(&*t, &text, false)?;
        put_ids(&got, ids, cap, n)
    })
}
