// SPDX-License-Identifier: Apache-2.0
//! Python's whitespace where minijinja uses Rust's: `str.strip()`,
//! `lstrip()`, `rstrip()`, `split()`, `isspace()` without arguments and the
//! `trim` filter. Python counts U+001C..U+001F as whitespace, Rust does
//! not; everything else goes to minijinja-contrib's pycompat.

use minijinja::value::ValueKind;
use minijinja::{Error, State, Value};

fn py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

pub fn trim_filter(s: String, chars: Option<String>) -> String {
    match chars {
        Some(set) => s.trim_matches(|c| set.contains(c)).to_string(),
        None => s.trim_matches(py_space).to_string(),
    }
}

pub fn unknown_method(state: &mut State, value: &Value, method: &str, args: &[Value])
    -> Result<Value, Error> {
    if value.kind() == ValueKind::String && args.is_empty() {
        let s = value.as_str().unwrap_or("");
        match method {
            "strip" => return Ok(Value::from(s.trim_matches(py_space))),
            "lstrip" => return Ok(Value::from(s.trim_start_matches(py_space))),
            "rstrip" => return Ok(Value::from(s.trim_end_matches(py_space))),
            "isspace" => return Ok(Value::from(!s.is_empty() && s.chars().all(py_space))),
            "split" => {
                return Ok(s.split(py_space).filter(|p| !p.is_empty()).map(Value::from).collect())
            }
            _ => {}
        }
    }
    minijinja_contrib::pycompat::unknown_method_callback(state, value, method, args)
}
