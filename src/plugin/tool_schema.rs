//! Checking a tool's `spec().parameters` as a JSON Schema, for
//! `agentd plugin check`. The load-time probe only requires valid JSON (the
//! host passes the schema to the model as it is); a schema that is JSON but
//! not a schema, or not the object schema OpenAI-compatible servers require
//! for a function's parameters, is found here instead of by a model that
//! calls the tool wrongly, or a server that answers 400.
//!
//! Written here rather than taken from the `jsonschema` crate: that one
//! validates instances and would add 34 crates (regex and fancy-regex
//! among them) to the daemon's build for a check of the handful of
//! keywords tool schemas use. This covers the structure of those keywords
//! (draft 2020-12 vocabulary), not every keyword of the meta-schema.

use serde_json::{Map, Value};

/// The JSON Schema type names.
const TYPES: &[&str] = &[
    "null", "boolean", "object", "array", "number", "string", "integer",
];

/// Everything wrong with `parameters` as a tool's parameter schema, each
/// naming where (`/properties/path/type`); empty when it is sound.
pub fn schema_problems(parameters: &str) -> Vec<String> {
    let schema: Value = match serde_json::from_str(parameters) {
        Ok(v) => v,
        Err(e) => return vec![format!("the parameters are not valid JSON: {e}")],
    };
    let mut problems = Vec::new();
    match &schema {
        Value::Object(top) => {
            if top.get("type").and_then(Value::as_str) != Some("object") {
                problems.push(
                    "the parameters schema must have \"type\": \"object\" at the top (a function's arguments are a JSON object, and OpenAI-compatible servers refuse other schemas)".to_string(),
                );
            }
        }
        _ => problems.push("the parameters schema must be a JSON object".to_string()),
    }
    check_schema(&schema, "", &mut problems);
    problems
}

fn check_schema(schema: &Value, at: &str, problems: &mut Vec<String>) {
    let map = match schema {
        Value::Bool(_) => return,
        Value::Object(map) => map,
        other => {
            problems.push(format!(
                "{}: a schema must be an object or a boolean, not {}",
                here(at),
                kind(other)
            ));
            return;
        }
    };
    let mut problem = |key: &str, text: String| problems.push(format!("{at}/{key}: {text}"));
    if let Some(t) = map.get("type") {
        let names: Vec<&Value> = match t {
            Value::Array(items) if !items.is_empty() => items.iter().collect(),
            Value::Array(_) => {
                problem("type", "an empty list of types".into());
                Vec::new()
            }
            one => vec![one],
        };
        for name in names {
            match name.as_str() {
                Some(n) if TYPES.contains(&n) => {}
                Some(n) => problem(
                    "type",
                    format!("`{n}` is not a JSON Schema type ({})", TYPES.join(", ")),
                ),
                None => problem("type", format!("must be a type name, not {}", kind(name))),
            }
        }
    }
    for key in ["title", "description", "pattern", "format", "$ref"] {
        if let Some(v) = map.get(key) {
            if !v.is_string() {
                problem(key, format!("must be a string, not {}", kind(v)));
            }
        }
    }
    for key in [
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
    ] {
        if let Some(v) = map.get(key) {
            if v.as_u64().is_none() {
                problem(key, format!("must be a non-negative integer, not {v}"));
            }
        }
    }
    for key in [
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
    ] {
        if let Some(v) = map.get(key) {
            if !v.is_number() {
                problem(key, format!("must be a number, not {}", kind(v)));
            }
        }
    }
    if let Some(v) = map.get("enum") {
        match v.as_array() {
            Some(items) if !items.is_empty() => {}
            _ => problem("enum", "must be a non-empty array".into()),
        }
    }
    let properties = map.get("properties");
    if let Some(v) = properties {
        match v.as_object() {
            Some(props) => {
                for (name, sub) in props {
                    check_schema(sub, &format!("{at}/properties/{name}"), problems);
                }
            }
            None => problems.push(format!(
                "{at}/properties: must be an object of schemas, not {}",
                kind(v)
            )),
        }
    }
    check_required(map, at, problems);
    for key in ["additionalProperties", "items", "not", "contains"] {
        if let Some(sub) = map.get(key) {
            check_schema(sub, &format!("{at}/{key}"), problems);
        }
    }
    for key in ["anyOf", "oneOf", "allOf", "prefixItems"] {
        if let Some(v) = map.get(key) {
            match v.as_array() {
                Some(items) if !items.is_empty() => {
                    for (i, sub) in items.iter().enumerate() {
                        check_schema(sub, &format!("{at}/{key}/{i}"), problems);
                    }
                }
                _ => problems.push(format!("{at}/{key}: must be a non-empty array of schemas")),
            }
        }
    }
    for key in ["$defs", "definitions"] {
        if let Some(v) = map.get(key) {
            match v.as_object() {
                Some(defs) => {
                    for (name, sub) in defs {
                        check_schema(sub, &format!("{at}/{key}/{name}"), problems);
                    }
                }
                None => problems.push(format!("{at}/{key}: must be an object of schemas")),
            }
        }
    }
}

/// `required` is a list of distinct property names; a name missing from
/// `properties` is almost always a typo, and strict servers refuse it.
fn check_required(map: &Map<String, Value>, at: &str, problems: &mut Vec<String>) {
    let Some(required) = map.get("required") else {
        return;
    };
    let Some(names) = required.as_array() else {
        problems.push(format!(
            "{at}/required: must be an array of property names, not {}",
            kind(required)
        ));
        return;
    };
    let properties = map.get("properties").and_then(Value::as_object);
    let mut seen = std::collections::BTreeSet::new();
    for name in names {
        let Some(name) = name.as_str() else {
            problems.push(format!(
                "{at}/required: must list property names (strings), not {}",
                kind(name)
            ));
            continue;
        };
        if !seen.insert(name) {
            problems.push(format!("{at}/required: `{name}` is listed twice"));
        }
        if properties.is_some_and(|p| !p.contains_key(name)) {
            problems.push(format!(
                "{at}/required: `{name}` is not among the properties"
            ));
        }
    }
}

fn here(at: &str) -> &str {
    if at.is_empty() {
        "the schema"
    } else {
        at
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sound_tool_schema_has_no_problems() {
        let schema = r#"{"type":"object","properties":{"text":{"type":"string","description":"t"},
            "n":{"type":["integer","null"],"minimum":0},"tags":{"type":"array","items":{"type":"string"}}},
            "required":["text"],"additionalProperties":false}"#;
        assert_eq!(schema_problems(schema), Vec::<String>::new());
    }

    #[test]
    fn every_problem_is_listed_with_where_it_is() {
        let schema = r#"{"type":"object","properties":{"a":{"type":"strng"},"b":{"minLength":-1},
            "c":3},"required":["a","a","zzz"]}"#;
        let problems = schema_problems(schema);
        let want = [
            "/properties/a/type: `strng` is not a JSON Schema type",
            "/properties/b/minLength",
            "/properties/c: a schema must be an object or a boolean",
            "/required: `a` is listed twice",
            "/required: `zzz` is not among the properties",
        ];
        for w in want {
            assert!(problems.iter().any(|p| p.contains(w)), "{w}: {problems:#?}");
        }
        assert_eq!(problems.len(), want.len(), "{problems:#?}");
    }

    #[test]
    fn the_top_must_be_an_object_schema() {
        assert!(schema_problems(r#"{"type":"string"}"#)[0].contains("\"type\": \"object\""));
        assert!(schema_problems("[1]")[0].contains("must be a JSON object"));
        assert!(schema_problems("{")
            .iter()
            .any(|p| p.contains("not valid JSON")));
    }
}
