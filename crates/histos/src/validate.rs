//! The argument/return validator: not JSON Schema, one level deep (HISTOS-ENGINE §4).

use crate::model::{Field, FieldType, Schema};
use crate::value::{Value, num_of};

/// One validation error: the field path (`amount`, `tags[1]`) and a message that never
/// quotes the argument value.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// Field path before the `:`.
    pub field: String,
    /// What failed.
    pub message: &'static str,
}

impl FieldError {
    fn new(field: impl Into<String>, message: &'static str) -> Self {
        FieldError {
            field: field.into(),
            message,
        }
    }
}

/// Errors joined by `; ` as `<field>: <message>` (the decision reason).
pub fn join(errors: &[FieldError]) -> String {
    let mut s = String::with_capacity(
        errors
            .iter()
            .map(|e| e.field.len() + e.message.len() + 4)
            .sum(),
    );
    for (i, e) in errors.iter().enumerate() {
        if i > 0 {
            s.push_str("; ");
        }
        s.push_str(&e.field);
        s.push_str(": ");
        s.push_str(e.message);
    }
    s
}

/// Validates an argument mapping of `n_args` entries given as an iterator over
/// (name, value) in call order, plus a lookup. Returns all errors (HISTOS-ENGINE §4 steps 1–3).
pub(crate) fn validate<'a, I, G>(schema: &Schema, n_args: usize, iter: I, get: G) -> Vec<FieldError>
where
    I: Iterator<Item = (&'a str, &'a Value)>,
    G: Fn(&str) -> Option<&'a Value>,
{
    let mut errors = Vec::new();
    let mut present = 0usize;
    for f in &schema.fields {
        match get(&f.name) {
            None => {
                if f.required {
                    errors.push(FieldError::new(&f.name, "required but missing"));
                }
            }
            Some(v) => {
                present += 1;
                if let Some(e) = check_value(f, v) {
                    errors.push(e);
                }
            }
        }
    }
    if !schema.allow_extra && n_args != present {
        // Every argument matched a declared field when the counts agree; otherwise
        // name the undeclared ones in call order.
        for (k, _) in iter {
            if schema.field(k).is_none() {
                errors.push(FieldError::new(k, "unexpected argument (not in schema)"));
            }
        }
    }
    errors
}

fn type_ok(t: FieldType, v: &Value) -> bool {
    match t {
        FieldType::String => matches!(v, Value::Str(_)),
        FieldType::Integer => v.is_integer(),
        FieldType::Number => v.is_number(),
        FieldType::Boolean => matches!(v, Value::Bool(_)),
        FieldType::Array => matches!(v, Value::List(_)),
        FieldType::Object => matches!(v, Value::Map(_)),
        FieldType::Any => true,
    }
}

/// The first failure for one value of a declared field.
pub(crate) fn check_value(f: &Field, v: &Value) -> Option<FieldError> {
    if matches!(v, Value::Null) && f.nullable {
        return None;
    }
    if !type_ok(f.ty, v) {
        return Some(FieldError::new(&f.name, type_message(f.ty)));
    }
    if let Some(en) = &f.enum_values
        && !en.iter().any(|e| e.py_eq(v))
    {
        return Some(FieldError::new(&f.name, "not one of the allowed values"));
    }
    match v {
        Value::Str(s) => string_checks(f, s).map(|m| FieldError::new(&f.name, m)),
        Value::Int(_) | Value::BigInt(_) | Value::Float(_) => {
            number_checks(f, v).map(|m| FieldError::new(&f.name, m))
        }
        Value::List(items) => array_checks(f, items),
        _ => None,
    }
}

fn type_message(t: FieldType) -> &'static str {
    match t {
        FieldType::String => "expected string",
        FieldType::Integer => "expected integer",
        FieldType::Number => "expected number",
        FieldType::Boolean => "expected boolean",
        FieldType::Array => "expected array",
        FieldType::Object => "expected object",
        FieldType::Any => "expected any",
    }
}

fn string_checks(f: &Field, s: &str) -> Option<&'static str> {
    if f.min_length.is_some() || f.max_length.is_some() {
        let n = s.chars().count() as u64;
        if f.min_length.is_some_and(|m| n < m) {
            return Some("shorter than min_length");
        }
        if f.max_length.is_some_and(|m| n > m) {
            return Some("longer than max_length");
        }
    }
    if let Some(p) = &f.pattern {
        match p.full_match(s) {
            None => return Some("pattern input too long"),
            Some(false) => return Some("does not match pattern"),
            Some(true) => {}
        }
    }
    None
}

fn cmp(a: &Value, b: &Value) -> Option<std::cmp::Ordering> {
    num_of(a)?.cmp_num(&num_of(b)?)
}

fn number_checks(f: &Field, v: &Value) -> Option<&'static str> {
    use std::cmp::Ordering::*;
    if let Value::Float(x) = v
        && !x.is_finite()
    {
        return Some("not a finite number");
    }
    if let Some(b) = &f.minimum
        && cmp(v, b) == Some(Less)
    {
        return Some("below minimum");
    }
    if let Some(b) = &f.maximum
        && cmp(v, b) == Some(Greater)
    {
        return Some("above maximum");
    }
    if let Some(b) = &f.exclusive_minimum
        && matches!(cmp(v, b), Some(Less | Equal))
    {
        return Some("not above exclusive_minimum");
    }
    if let Some(b) = &f.exclusive_maximum
        && matches!(cmp(v, b), Some(Greater | Equal))
    {
        return Some("not below exclusive_maximum");
    }
    if let Some(m) = &f.multiple_of
        && !is_multiple(v, m)
    {
        return Some("not a multiple of multiple_of");
    }
    None
}

fn integral(v: &Value) -> Option<i128> {
    match v {
        Value::Int(i) => Some(i128::from(*i)),
        Value::BigInt(s) => s.parse().ok(),
        Value::Float(f) if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e38 => Some(*f as i128),
        _ => None,
    }
}

fn is_multiple(v: &Value, m: &Value) -> bool {
    if let (Some(a), Some(b)) = (integral(v), integral(m)) {
        return b != 0 && a % b == 0;
    }
    let (Some(a), Some(b)) = (v.as_f64(), m.as_f64()) else {
        return false;
    };
    let q = a / b;
    let r = q.round();
    // math.isclose(q, round(q), rel_tol=1e-9, abs_tol=1e-9)
    (q - r).abs() <= f64::max(1e-9 * f64::max(q.abs(), r.abs()), 1e-9)
}

/// Most unhashable (list/object) elements `unique_items` compares pairwise, like the
/// reference; more are refused as uncheckable.
pub const MAX_UNHASHABLE_UNIQUE: usize = 512;

#[derive(PartialEq, Eq, Hash)]
enum Key<'a> {
    Null,
    Int(i128),
    Float(u64),
    Big(&'a str),
    Str(&'a str),
    Other(&'a str),
}

/// Python-set uniqueness: `1`, `1.0` and `true` collide; linear for scalars.
fn uniqueness(items: &[Value]) -> Option<&'static str> {
    let mut seen = std::collections::HashSet::with_capacity(items.len());
    let mut unhashable: Vec<&Value> = Vec::new();
    for it in items {
        let k = match it {
            Value::Null => Key::Null,
            Value::Bool(b) => Key::Int(i128::from(*b)),
            Value::Int(i) => Key::Int(i128::from(*i)),
            Value::BigInt(s) => Key::Big(s),
            Value::Float(x) if x.is_finite() && x.fract() == 0.0 && x.abs() < 1e38 => {
                Key::Int(*x as i128)
            }
            Value::Float(x) => Key::Float(if *x == 0.0 { 0 } else { x.to_bits() }),
            Value::Str(s) => Key::Str(s),
            Value::Timestamp(s) => Key::Other(s),
            Value::List(_) | Value::Map(_) => {
                if unhashable.len() == MAX_UNHASHABLE_UNIQUE {
                    return Some("too many unhashable elements to check uniqueness");
                }
                if unhashable.iter().any(|u| u.py_eq(it)) {
                    return Some("elements are not unique");
                }
                unhashable.push(it);
                continue;
            }
        };
        if !seen.insert(k) {
            return Some("elements are not unique");
        }
    }
    None
}

fn array_checks(f: &Field, items: &[Value]) -> Option<FieldError> {
    let n = items.len() as u64;
    if f.min_items.is_some_and(|m| n < m) {
        return Some(FieldError::new(&f.name, "fewer than min_items"));
    }
    if f.max_items.is_some_and(|m| n > m) {
        return Some(FieldError::new(&f.name, "more than max_items"));
    }
    if f.unique_items
        && let Some(m) = uniqueness(items)
    {
        return Some(FieldError::new(&f.name, m));
    }
    for (i, it) in items.iter().enumerate() {
        let name = || format!("{}[{i}]", f.name);
        if let Some(en) = &f.item_enum
            && !en.iter().any(|e| e.py_eq(it))
        {
            return Some(FieldError::new(name(), "not one of the allowed values"));
        }
        if let Some(t) = f.item_type
            && !type_ok(t, it)
        {
            return Some(FieldError::new(name(), type_message(t)));
        }
        let msg = match it {
            Value::Str(s) => string_checks(f, s),
            Value::Int(_) | Value::BigInt(_) | Value::Float(_) => number_checks(f, it),
            _ => None,
        };
        if let Some(m) = msg {
            return Some(FieldError::new(name(), m));
        }
    }
    None
}
