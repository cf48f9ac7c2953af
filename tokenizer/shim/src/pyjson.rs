// SPDX-License-Identifier: Apache-2.0
//! `tojson` as `transformers` defines it for chat templates: Python's
//! `json.dumps(x, ensure_ascii=False, indent=indent, separators=...,
//! sort_keys=...)`, byte for byte (", " and ": " without indent, "," and
//! ": " with it; floats as Python's repr; no HTML escaping).

use minijinja::value::{Kwargs, ValueKind};
use minijinja::{Error, ErrorKind, Value};

struct Style {
    indent: Option<String>,
    item_sep: String,
    key_sep: String,
    sort_keys: bool,
    ensure_ascii: bool,
}

pub fn tojson_filter(v: Value, kwargs: Kwargs) -> Result<Value, Error> {
    let indent: Option<Value> = kwargs.get("indent")?;
    let indent = match indent {
        None => None,
        Some(i) if i.is_none() => None,
        Some(i) => match i.kind() {
            ValueKind::String => Some(i.as_str().unwrap_or("").to_string()),
            _ => Some(" ".repeat(i64::try_from(i)?.max(0) as usize)),
        },
    };
    let seps: Option<Vec<String>> = kwargs.get("separators")?;
    let (item_sep, key_sep) = match seps {
        Some(s) if s.len() == 2 => (s[0].clone(), s[1].clone()),
        Some(_) => return Err(Error::new(ErrorKind::InvalidOperation, "separators: two strings")),
        None if indent.is_some() => (",".to_string(), ": ".to_string()),
        None => (", ".to_string(), ": ".to_string()),
    };
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    let ensure_ascii: Option<bool> = kwargs.get("ensure_ascii")?;
    kwargs.assert_all_used()?;
    let style = Style {
        indent,
        item_sep,
        key_sep,
        sort_keys: sort_keys.unwrap_or(false),
        ensure_ascii: ensure_ascii.unwrap_or(false),
    };
    let mut out = String::new();
    dump(&v, &style, 0, &mut out)?;
    Ok(Value::from(out))
}

fn newline(style: &Style, depth: usize, out: &mut String) {
    if let Some(ind) = &style.indent {
        out.push('\n');
        for _ in 0..depth {
            out.push_str(ind);
        }
    }
}

fn dump(v: &Value, style: &Style, depth: usize, out: &mut String) -> Result<(), Error> {
    match v.kind() {
        ValueKind::Undefined | ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if v.is_true() { "true" } else { "false" }),
        ValueKind::Number => number(v, out),
        ValueKind::String | ValueKind::Bytes => string(v.as_str().unwrap_or(""), style, out),
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = v.try_iter()?.collect();
            container(style, depth, out, ('[', ']'), items.len(), |i, out| {
                dump(&items[i], style, depth + 1, out)
            })?;
        }
        ValueKind::Map => {
            let mut keys: Vec<Value> = v.try_iter()?.collect();
            if style.sort_keys {
                keys.sort_by(|a, b| a.to_string().cmp(&b.to_string()));
            }
            container(style, depth, out, ('{', '}'), keys.len(), |i, out| {
                let key = &keys[i];
                match key.as_str() {
                    Some(s) => string(s, style, out),
                    None => string(&key.to_string(), style, out),
                }
                out.push_str(&style.key_sep);
                dump(&v.get_item(key)?, style, depth + 1, out)
            })?;
        }
        _ => string(&v.to_string(), style, out),
    }
    Ok(())
}

fn container<F>(style: &Style, depth: usize, out: &mut String, brackets: (char, char), n: usize,
                mut item: F) -> Result<(), Error>
where
    F: FnMut(usize, &mut String) -> Result<(), Error>,
{
    out.push(brackets.0);
    if n == 0 {
        out.push(brackets.1);
        return Ok(());
    }
    for i in 0..n {
        if i > 0 {
            out.push_str(&style.item_sep);
        }
        newline(style, depth + 1, out);
        item(i, out)?;
    }
    newline(style, depth, out);
    out.push(brackets.1);
    Ok(())
}

/// Python's float repr: shortest round trip, exponent form below 1e-4 and
/// from 1e16 on, at least one digit after the point otherwise.
fn number(v: &Value, out: &mut String) {
    if v.is_integer() {
        out.push_str(&v.to_string());
        return;
    }
    let f = f64::try_from(v.clone()).unwrap_or(f64::NAN);
    if f.is_nan() {
        out.push_str("NaN");
    } else if f.is_infinite() {
        out.push_str(if f > 0.0 { "Infinity" } else { "-Infinity" });
    } else if f == 0.0 || (1e-4..1e16).contains(&f.abs()) {
        let s = format!("{}", f);
        out.push_str(&s);
        if !s.contains('.') {
            out.push_str(".0");
        }
    } else {
        let e = format!("{:e}", f);
        let (mant, exp) = e.split_once('e').unwrap_or((&e, "0"));
        let exp: i32 = exp.parse().unwrap_or(0);
        out.push_str(mant);
        out.push_str(&format!("e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs()));
    }
}

fn string(s: &str, style: &Style, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c if style.ensure_ascii && (c as u32) > 0x7e => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    out.push_str(&format!("\\u{:04x}", unit));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}
