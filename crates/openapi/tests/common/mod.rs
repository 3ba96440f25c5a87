//! The test document: the example server's `/test` endpoints and a small API, in 3.0 or
//! 3.1 form, with the server's origin as its first server.

#![allow(dead_code)]

use serde_json::{Value, json};

/// A document whose server is `origin` (`http://127.0.0.1:PORT`).
pub fn doc(origin: &str, version: &str) -> Value {
    let nullable_limit = if version.starts_with("3.0") {
        json!({"type": "integer", "minimum": 1, "maximum": 100, "nullable": true})
    } else {
        json!({"type": ["integer", "null"], "minimum": 1, "maximum": 100})
    };
    json!({
        "openapi": version,
        "info": {"title": "test", "version": "1"},
        "servers": [{"url": format!("{origin}/test")}],
        "paths": {
            "/echo/{item}": {
                "parameters": [{"name": "item", "in": "path", "required": true, "schema": {"type": "string"}}],
                "get": {
                    "operationId": "echoGet",
                    "parameters": [
                        {"name": "status", "in": "query", "schema": {"type": "string", "enum": ["open", "done"]}},
                        {"name": "limit", "in": "query", "schema": nullable_limit},
                        {"name": "q", "in": "query", "schema": {"type": "string"}},
                        {"name": "tags", "in": "query", "schema": {"type": "array", "items": {"type": "string"}}},
                        {"name": "X-Trace", "in": "header", "schema": {"type": "string"}},
                        {"name": "session", "in": "cookie", "schema": {"type": "string"}}
                    ],
                    "security": [{"bearer": []}]
                },
                "post": {
                    "operationId": "echoPost",
                    "security": [{"key": []}],
                    "requestBody": {"required": true, "content": {"application/json": {"schema": {
                        "allOf": [
                            {"$ref": "#/components/schemas/Base"},
                            {"type": "object", "required": ["count"], "properties": {
                                "count": {"type": "integer", "minimum": 0},
                                "done": {"type": "boolean"}
                            }}
                        ]
                    }}}}
                }
            },
            "/redirect": {"get": {"operationId": "redirect", "parameters": [
                {"name": "to", "in": "query", "required": true, "schema": {"type": "string"}}]}},
            "/fail": {"get": {"operationId": "fail"}},
            "/huge": {"get": {"operationId": "huge"}},
            "/hang": {"get": {"operationId": "hang"}},
            "/close": {"get": {"operationId": "close"}}
        },
        "components": {
            "schemas": {"Base": {"type": "object", "properties": {"title": {"type": "string", "maxLength": 10}}}},
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "key": {"type": "apiKey", "in": "header", "name": "X-Api-Key"}
            }
        }
    })
}

/// Arguments from `(name, value)` pairs.
pub fn args(pairs: &[(&str, Value)]) -> serde_json::Map<String, Value> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}
