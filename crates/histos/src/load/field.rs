//! Argument and return schemas and their fields (HISTOS-ENGINE §2b, §4).

use std::collections::HashMap;

use crate::doc::{Kind, Node};
use crate::error::{PolicyCode as C, PolicyError};
use crate::model::*;
use crate::pattern::Pattern;
use crate::value::{NON_STRING_KEY_PREFIX, Value};

use super::keys::take_keys;
use super::tool::is_json_value;
use super::{Loc, err};

pub(super) fn load_schema<'d, N: Node<'d>>(
    v: Option<N>,
    loc: &Loc<'_>,
    patterns: &mut HashMap<String, Pattern>,
) -> Result<Option<Schema>, PolicyError> {
    let m = match v.map(|v| (v, v.kind())) {
        None | Some((_, Kind::Null)) => return Ok(None),
        Some((m, Kind::Map)) => m,
        Some(_) => {
            return Err(err(
                C::NotAMapping,
                "a schema must be a mapping of fields",
                loc,
            ));
        }
    };
    if m.len() == 1 && m.contains_key("json_schema") {
        return Err(err(
            C::PolicyInvalid,
            "inline `json_schema` import is not supported by this engine",
            loc,
        ));
    }
    let mut schema = Schema::default();
    schema.fields.reserve(m.len());
    for (k, body) in m.entries() {
        if k == "$allow_extra" {
            match body.kind() {
                Kind::Bool(b) => schema.allow_extra = b,
                _ => {
                    return Err(err(
                        C::PolicyInvalid,
                        "`$allow_extra` must be true or false",
                        &loc.key("$allow_extra"),
                    ));
                }
            }
            continue;
        }
        let floc = loc.key(k);
        if k.starts_with(NON_STRING_KEY_PREFIX) {
            return Err(err(C::InvalidField, "a field name must be a string", &floc));
        }
        schema.fields.push(load_field(k, body, &floc, patterns)?);
    }
    Ok(Some(schema))
}

const FIELD_KEYS: [&str; 18] = [
    "type",
    "required",
    "nullable",
    "enum",
    "min_length",
    "max_length",
    "pattern",
    "minimum",
    "maximum",
    "exclusive_minimum",
    "exclusive_maximum",
    "multiple_of",
    "min_items",
    "max_items",
    "unique_items",
    "item_type",
    "item_enum",
    "sensitive",
];

fn load_field<'d, N: Node<'d>>(
    name: &str,
    body: N,
    loc: &Loc<'_>,
    patterns: &mut HashMap<String, Pattern>,
) -> Result<Field, PolicyError> {
    let Some(m) = body.map() else {
        let msg = match name {
            "properties" | "required" | "additionalProperties" | "type" | "$schema" => format!(
                "a field must be a mapping; `{name}` reads like JSON Schema, but `args` and \
                 `returns` map each argument name to its field (`name: {{type: string, \
                 max_length: 64}}`)"
            ),
            _ => "a field must be a mapping (`type`, `required`, `max_length`, …)".to_string(),
        };
        return Err(err(C::InvalidField, msg, loc));
    };
    // One pass over the field's keys (each value is then at hand, not looked up).
    let [
        f_type,
        f_required,
        f_nullable,
        f_enum,
        f_min_length,
        f_max_length,
        f_pattern,
        f_minimum,
        f_maximum,
        f_exclusive_minimum,
        f_exclusive_maximum,
        f_multiple_of,
        f_min_items,
        f_max_items,
        f_unique_items,
        f_item_type,
        f_item_enum,
        f_sensitive,
    ] = take_keys(m, &FIELD_KEYS, loc)?;
    let bad = |k: &str, msg: &str| err(C::InvalidField, msg.to_string(), &loc.key(k));
    let ty_of = |k: &str, v: Option<N>| -> Result<Option<FieldType>, PolicyError> {
        match v.map(Node::kind) {
            None | Some(Kind::Null) => Ok(None),
            Some(Kind::Str(s)) => FieldType::parse(s)
                .map(Some)
                .ok_or_else(|| bad(k, "unknown type")),
            Some(_) => Err(bad(k, "a type must be a string")),
        }
    };
    let ty = ty_of("type", f_type)?.unwrap_or(FieldType::String);
    let item_type = ty_of("item_type", f_item_type)?;
    let flag = |k: &str, v: Option<N>, d: bool| -> Result<bool, PolicyError> {
        match v.map(Node::kind) {
            None => Ok(d),
            Some(Kind::Bool(b)) => Ok(b),
            Some(_) => Err(bad(k, "must be true or false")),
        }
    };
    let required = flag("required", f_required, true)?;
    let nullable = flag("nullable", f_nullable, false)?;
    let unique_items = flag("unique_items", f_unique_items, false)?;
    let list = |k: &str, v: Option<N>| -> Result<Option<Vec<Value>>, PolicyError> {
        match v.map(|l| (l, l.kind())) {
            None | Some((_, Kind::Null)) => Ok(None),
            Some((l, Kind::List)) if l.len() == 0 => Err(bad(k, "must not be empty")),
            Some((l, Kind::List)) => {
                if l.items().all(is_json_value) {
                    Ok(Some(l.items().map(Node::to_value).collect()))
                } else {
                    Err(bad(k, "values must be JSON values"))
                }
            }
            Some(_) => Err(err(
                C::NotAList,
                format!("`{k}` must be a list"),
                &loc.key(k),
            )),
        }
    };
    let enum_values = list("enum", f_enum)?;
    let item_enum = list("item_enum", f_item_enum)?;
    let count = |k: &str, v: Option<N>| -> Result<Option<u64>, PolicyError> {
        match v.map(Node::kind) {
            None | Some(Kind::Null) => Ok(None),
            Some(Kind::Int(i)) if i >= 0 => Ok(Some(i as u64)),
            Some(Kind::Big(s)) if !s.starts_with('-') => Ok(Some(u64::MAX)),
            Some(_) => Err(bad(k, "must be a non-negative integer")),
        }
    };
    let min_length = count("min_length", f_min_length)?;
    let max_length = count("max_length", f_max_length)?;
    let min_items = count("min_items", f_min_items)?;
    let max_items = count("max_items", f_max_items)?;
    let bound = |k: &str, v: Option<N>| -> Result<Option<Value>, PolicyError> {
        match v.map(|v| (v, v.kind())) {
            None | Some((_, Kind::Null)) => Ok(None),
            Some((v, n @ (Kind::Int(_) | Kind::Big(_) | Kind::Float(_)))) => {
                let f = n.as_f64().unwrap_or(f64::INFINITY);
                if !f.is_finite() || f.abs() > 1e308 {
                    Err(bad(k, "must be a finite number"))
                } else {
                    Ok(Some(v.to_value()))
                }
            }
            Some(_) => Err(bad(k, "must be a number")),
        }
    };
    let minimum = bound("minimum", f_minimum)?;
    let maximum = bound("maximum", f_maximum)?;
    let exclusive_minimum = bound("exclusive_minimum", f_exclusive_minimum)?;
    let exclusive_maximum = bound("exclusive_maximum", f_exclusive_maximum)?;
    let multiple_of = bound("multiple_of", f_multiple_of)?;
    let sensitive = match f_sensitive.map(Node::kind) {
        None | Some(Kind::Null) => None,
        Some(Kind::Str("pii")) => Some(Sensitive::Pii),
        Some(Kind::Str("secret")) => Some(Sensitive::Secret),
        Some(_) => return Err(bad("sensitive", "must be pii or secret")),
    };
    let pattern_src = match f_pattern.map(Node::kind) {
        None | Some(Kind::Null) => None,
        Some(Kind::Str(s)) => Some(s),
        Some(_) => return Err(bad("pattern", "must be a string")),
    };
    // Applicability (a keyword the declared type never consults is refused).
    use FieldType as T;
    let has_string = min_length.is_some() || max_length.is_some() || pattern_src.is_some();
    let has_numeric = minimum.is_some()
        || maximum.is_some()
        || exclusive_minimum.is_some()
        || exclusive_maximum.is_some()
        || multiple_of.is_some();
    let has_items = item_type.is_some()
        || item_enum.is_some()
        || min_items.is_some()
        || max_items.is_some()
        || unique_items;
    if has_string && !matches!(ty, T::String | T::Array | T::Any) {
        return Err(err(
            C::InvalidField,
            format!("string bounds do not apply to type {}", ty.as_str()),
            loc,
        ));
    }
    if has_numeric && !matches!(ty, T::Integer | T::Number | T::Array | T::Any) {
        return Err(err(
            C::InvalidField,
            format!("numeric bounds do not apply to type {}", ty.as_str()),
            loc,
        ));
    }
    if has_items && ty != T::Array {
        return Err(err(
            C::InvalidField,
            "item keywords apply only to arrays",
            loc,
        ));
    }
    if item_type == Some(T::Array) {
        return Err(bad("item_type", "nested arrays are not supported"));
    }
    if ty == T::Array
        && let Some(it) = item_type
    {
        if has_string && !matches!(it, T::String | T::Any) {
            return Err(err(
                C::InvalidField,
                "string bounds do not fit the element type",
                loc,
            ));
        }
        if has_numeric && !matches!(it, T::Integer | T::Number | T::Any) {
            return Err(err(
                C::InvalidField,
                "numeric bounds do not fit the element type",
                loc,
            ));
        }
    }
    let lt = |a: &Option<Value>, b: &Option<Value>, strict: bool| -> bool {
        match (a, b) {
            (Some(a), Some(b)) => {
                let (Some(x), Some(y)) = (crate::value::num_of(a), crate::value::num_of(b)) else {
                    return false;
                };
                match x.cmp_num(&y) {
                    Some(std::cmp::Ordering::Greater) => true,
                    Some(std::cmp::Ordering::Equal) => strict,
                    _ => false,
                }
            }
            _ => false,
        }
    };
    if matches!((min_length, max_length), (Some(a), Some(b)) if a > b)
        || matches!((min_items, max_items), (Some(a), Some(b)) if a > b)
        || lt(&minimum, &maximum, false)
        || lt(&minimum, &exclusive_maximum, true)
        || lt(&exclusive_minimum, &maximum, true)
        || lt(&exclusive_minimum, &exclusive_maximum, true)
    {
        return Err(err(C::InvalidField, "contradictory bounds", loc));
    }
    if multiple_of.as_ref().and_then(Value::as_f64) == Some(0.0) {
        return Err(bad("multiple_of", "must not be 0"));
    }
    let pattern = match pattern_src {
        None => None,
        Some(src) => match patterns.get(src) {
            Some(p) => Some(p.clone()),
            None => {
                let p = Pattern::new(src).map_err(|e| e.at(loc.key("pattern").render()))?;
                patterns.insert(src.to_string(), p.clone());
                Some(p)
            }
        },
    };
    Ok(Field {
        name: name.to_string(),
        ty,
        required,
        nullable,
        enum_values,
        item_enum,
        item_type,
        min_length,
        max_length,
        pattern,
        sensitive,
        min_items,
        max_items,
        unique_items,
        minimum,
        maximum,
        exclusive_minimum,
        exclusive_maximum,
        multiple_of,
    })
}
