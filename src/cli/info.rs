//! `agents`, `plugins` and `status`: what the daemon has and how it is.

use serde_json::Value;

use super::client::{from_value, Client, ClientError};
use super::out;
use super::table::{duration, Table};
use crate::api::{AgentList, Status};

pub async fn agents(client: &Client, json: bool) -> Result<i32, ClientError> {
    let value: Value = client.get("/v1/agents").await?;
    if json {
        out::json(&value)?;
        return Ok(0);
    }
    let list: AgentList = from_value("/v1/agents", &value)?;
    out::text(&agents_table(&list));
    Ok(0)
}

fn agents_table(list: &AgentList) -> String {
    // The columns say where each setting comes from, so an agent that
    // silently sends no prompt is visible at a glance.
    let mut table = Table::new([
        "NAME",
        "STRATEGY",
        "MAX_STEPS",
        "SYSTEM_PROMPT",
        "NEXT_STEP_PROMPT",
        "TOOLS",
    ]);
    for a in &list.agents {
        table.row(vec![
            a.name.clone(),
            a.strategy.clone(),
            a.max_steps.map_or("-".into(), |m| {
                format!("{m} ({})", a.max_steps_source.as_str())
            }),
            a.system_prompt_source.as_str().to_string(),
            a.next_step_prompt_source.as_str().to_string(),
            a.tools.join(","),
        ]);
    }
    let notes = list.agents.iter().map(|a| {
        (!a.missing_plugins.is_empty()).then(|| {
            format!(
                "  missing plugins: {} (its runs fail at once)",
                a.missing_plugins.join(", ")
            )
        })
    });
    with_notes(&table, notes)
}

/// Each entry is read loosely: the daemon's plugin report grows fields
/// (status, error, serving version) faster than this table needs them.
pub async fn plugins(client: &Client, json: bool) -> Result<i32, ClientError> {
    let value: Value = client.get("/v1/plugins").await?;
    if json {
        out::json(&value)?;
        return Ok(0);
    }
    let Some(entries) = value.get("plugins").and_then(Value::as_array) else {
        return Err(ClientError::Protocol(
            "unexpected answer to /v1/plugins: no `plugins` list".into(),
        ));
    };
    out::text(&plugins_table(entries));
    Ok(0)
}

fn plugins_table(entries: &[Value]) -> String {
    let mut table = Table::new(["NAME", "KIND", "VERSION", "CONTRACT", "STATUS", "FILE"]);
    for p in entries {
        let version = field(p, "version");
        let version = match p.get("serving_version").and_then(Value::as_str) {
            Some(serving) if serving != version => format!("{version} (serving {serving})"),
            _ => version,
        };
        table.row(vec![
            field(p, "name"),
            field(p, "kind"),
            version,
            field(p, "contract"),
            field(p, "status"),
            field(p, "file"),
        ]);
    }
    let notes = entries.iter().map(|p| {
        let error = p
            .get("error")
            .and_then(Value::as_str)
            .filter(|e| !e.is_empty())
            .map(|e| format!("  error: {e}"));
        let lines: Vec<String> = error
            .into_iter()
            .chain(imports_note(p))
            .chain(grants_note(p))
            .collect();
        (!lines.is_empty()).then(|| lines.join("\n"))
    });
    with_notes(&table, notes)
}

/// `  imports: ...`: what the component imports that a grant can give it
/// (HTTP, environment, settings), by the key that grants it.
fn imports_note(p: &Value) -> Option<String> {
    let keys: Vec<&str> = p
        .get("grants_needed")?
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    if keys.is_empty() {
        return None;
    }
    let what = |k: &str| match k {
        "allow_hosts" => "HTTP (allow_hosts)",
        "env" | "secrets" => "environment (env, secrets)",
        "config" => "settings (config)",
        _ => "other",
    };
    let mut shown: Vec<&str> = keys.iter().map(|k| what(k)).collect();
    shown.dedup();
    Some(format!("  imports: {}", shown.join(", ")))
}

/// `  grants: ...` under a plugin that has any, and `  wants: allow_hosts`
/// under one that imports HTTP without a host granted: the one missing
/// grant that makes a tool fail at every call. Secrets by name only (the
/// API never sends their values).
fn grants_note(p: &Value) -> Option<String> {
    let g = p.get("grants")?;
    let list = |key: &str| -> Vec<String> {
        match g.get(key) {
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect(),
            Some(Value::Object(o)) => o.keys().cloned().collect(),
            _ => Vec::new(),
        }
    };
    let mut parts = Vec::new();
    for key in ["allow_hosts", "env", "secrets", "config"] {
        let items = list(key);
        if !items.is_empty() {
            parts.push(format!("{key} {}", items.join(",")));
        }
    }
    if let Some(t) = g.get("timeout_secs").and_then(Value::as_f64) {
        parts.push(format!("timeout {t}s"));
    }
    if let Some(m) = g.get("memory_limit").and_then(Value::as_u64) {
        parts.push(format!(
            "memory_limit {}",
            crate::plugin::settings::show_bytes(m)
        ));
    }
    let wants_http = p
        .get("grants_needed")
        .and_then(Value::as_array)
        .is_some_and(|n| n.iter().any(|k| k == "allow_hosts"));
    if wants_http && list("allow_hosts").is_empty() {
        parts.push("wants allow_hosts (it imports wasi:http; every request is refused)".into());
    }
    (!parts.is_empty()).then(|| format!("  grants: {}", parts.join("; ")))
}

fn field(v: &Value, key: &str) -> String {
    match v.get(key) {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        None | Some(Value::Null) | Some(Value::String(_)) => "-".into(),
        Some(other) => other.to_string(),
    }
}

/// The table with a note line under the rows that have one; notes are not
/// columns, so they do not widen the table.
fn with_notes(table: &Table, notes: impl Iterator<Item = Option<String>>) -> String {
    let rendered = table.render();
    let mut lines = rendered.lines();
    let mut out = String::new();
    if let Some(header) = lines.next() {
        out.push_str(header);
        out.push('\n');
    }
    for (row, note) in lines.zip(notes) {
        out.push_str(row);
        out.push('\n');
        if let Some(note) = note {
            out.push_str(&note);
            out.push('\n');
        }
    }
    out
}

pub async fn status(client: &Client, json: bool) -> Result<i32, ClientError> {
    let value: Value = client.get("/v1/status").await?;
    if json {
        out::json(&value)?;
        return Ok(0);
    }
    let status: Status = from_value("/v1/status", &value)?;
    out::text(&status_text(&status));
    Ok(0)
}

/// `NAME ADDRESS reachable, 3/20 containers` and the last error, if any.
fn engine_line(e: &crate::api::EngineSummary) -> String {
    let state = if e.reachable {
        "reachable"
    } else {
        "unreachable"
    };
    let capacity = e
        .capacity
        .map_or_else(|| "unbounded".to_string(), |c| c.to_string());
    let mut line = format!(
        "{} {} {state}, {}/{capacity} containers",
        e.name, e.address, e.containers
    );
    if let Some(err) = &e.last_error {
        line.push_str(&format!(", last error: {err}"));
    }
    line
}

fn status_text(s: &Status) -> String {
    let uptime = duration((s.uptime_s * 1000.0) as i64);
    let engine = &s.sandbox_engine;
    let sandbox = match (&engine.error, engine.reachable) {
        (_, true) => format!("{} (reachable)", engine.address),
        (Some(e), false) => format!("{} (unreachable: {e})", engine.address),
        (None, false) => format!("{} (unreachable)", engine.address),
    };
    let pool = &engine.pool;
    let pool = match (pool.target, &pool.last_error) {
        (0, _) => "off".to_string(),
        (t, None) => format!(
            "{} of {t} ready, {} being made, {} served",
            pool.ready, pool.creating, pool.served
        ),
        (t, Some(e)) => format!("{} of {t} ready; refilling fails: {e}", pool.ready),
    };
    let accepting = if s.accepting_runs {
        "yes"
    } else {
        "no (shutting down)"
    };
    let rows = [
        ("version", s.version.clone()),
        ("uptime", uptime),
        ("socket", s.socket.clone()),
        ("state dir", s.state_dir.clone()),
        (
            "runs",
            if s.runs_waiting > 0 {
                format!(
                    "{} running ({} waiting for a person), {} queued",
                    s.runs_active, s.runs_waiting, s.runs_queued
                )
            } else {
                format!("{} running, {} queued", s.runs_active, s.runs_queued)
            },
        ),
        (
            "plugins",
            if s.plugin_cache.enabled {
                format!(
                    "{} loaded ({} from the compile cache, {} compiled)",
                    s.plugins_loaded, s.plugin_cache.hits, s.plugin_cache.misses
                )
            } else {
                format!("{} loaded (compile cache off)", s.plugins_loaded)
            },
        ),
        ("sandbox", sandbox),
        ("pool", pool),
        ("accepting", accepting.to_string()),
        ("tokens", tokens_line(&s.token_budgets)),
    ];
    // With more than one engine, one line each (a single engine is the
    // `sandbox` line, as before engines existed).
    let engines = s
        .engines
        .iter()
        .filter(|_| s.engines.len() > 1)
        .map(|e| ("engine", engine_line(e)));
    // Last, one a line: what an operator should fix about the engine.
    let warnings = engine.warnings.iter().map(|w| ("warning", w.clone()));
    rows.into_iter()
        .chain(engines)
        .chain(warnings)
        .map(|(k, v)| format!("{k:<10} {}\n", super::sanitize::terminal_safe(&v)))
        .collect()
}

/// Today's tokens, and each daily budget's use: `1200 today (UTC); budgets:
/// daemon 1200/100000, coder 900/1000`.
fn tokens_line(b: &crate::api::TokenBudgets) -> String {
    let budgets: Vec<String> = b
        .daemon
        .iter()
        .chain(&b.agents)
        .map(|u| {
            format!(
                "{} {}/{}",
                u.agent.as_deref().unwrap_or("daemon"),
                u.used,
                u.budget
            )
        })
        .collect();
    if budgets.is_empty() {
        format!("{} today (UTC); no daily budget", b.used_today)
    } else {
        format!(
            "{} today (UTC); budgets: {}",
            b.used_today,
            budgets.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::settings::Source;
    use crate::api::{AgentView, EngineStatus};

    #[test]
    fn failed_plugins_carry_their_error_under_the_row() {
        let entries: Vec<Value> = serde_json::from_str(
            r#"[
              {"name":"bash","kind":"tool","version":"0.1.0","contract":"0.2.0","status":"loaded","file":"/p/bash.wasm","error":null,"sha256":"ab"},
              {"name":null,"kind":null,"version":null,"status":"failed","file":"/p/broken.wasm","error":"not a component"},
              {"name":"toolcall","kind":"strategy","version":"0.2.0","serving_version":"0.1.0","contract":"0.1.0","status":"loaded","file":"/p/toolcall.wasm"}
            ]"#,
        )
        .expect("json");
        assert_eq!(
            plugins_table(&entries),
            "NAME      KIND      VERSION                CONTRACT  STATUS  FILE\n\
             bash      tool      0.1.0                  0.2.0     loaded  /p/bash.wasm\n\
             -         -         -                      -         failed  /p/broken.wasm\n  \
             error: not a component\n\
             toolcall  strategy  0.2.0 (serving 0.1.0)  0.1.0     loaded  /p/toolcall.wasm\n"
        );
    }

    #[test]
    fn grants_and_a_missing_host_grant_show_under_the_row() {
        let entries: Vec<Value> = serde_json::from_str(
            r#"[
              {"name":"fetch","kind":"tool","version":"1","contract":"0.2.1","status":"loaded","file":"/p/fetch.wasm",
               "grants_needed":["allow_hosts","env"],"grants":{"allow_hosts":["api.github.com"],"env":{},"secrets":["TOKEN"],"config":{"a":"1"},"timeout_secs":2.5}},
              {"name":"curl","kind":"tool","version":"1","contract":"0.2.1","status":"loaded","file":"/p/curl.wasm",
               "grants_needed":["allow_hosts"],"grants":{"allow_hosts":[],"env":{},"secrets":[],"config":{}}}
            ]"#,
        )
        .expect("json");
        let text = plugins_table(&entries);
        assert!(
            text.contains(
                "  grants: allow_hosts api.github.com; secrets TOKEN; config a; timeout 2.5s\n"
            ),
            "{text}"
        );
        assert!(text.contains("  grants: wants allow_hosts"), "{text}");
        assert!(
            text.contains("  imports: HTTP (allow_hosts), environment (env, secrets)\n"),
            "{text}"
        );
        assert!(!text.contains("TOKEN="), "{text}");
    }

    #[test]
    fn agents_missing_plugins_say_so() {
        let list = AgentList {
            agents: vec![AgentView {
                name: "manus".into(),
                strategy: "toolcall".into(),
                tools: vec!["bash".into(), "terminate".into()],
                max_steps: Some(20),
                max_steps_source: Source::Agent,
                system_prompt: Some("You are OpenManus".into()),
                system_prompt_source: Source::Agent,
                next_step_prompt: None,
                next_step_prompt_source: Source::None,
                missing_plugins: vec!["bash".into()],
            }],
        };
        assert_eq!(
            agents_table(&list),
            "NAME   STRATEGY  MAX_STEPS   SYSTEM_PROMPT  NEXT_STEP_PROMPT  TOOLS\n\
             manus  toolcall  20 (agent)  agent          none              bash,terminate\n  \
             missing plugins: bash (its runs fail at once)\n"
        );
    }

    #[test]
    fn status_reads_as_key_value_lines() {
        let text = status_text(&Status {
            version: "0.1.0".into(),
            uptime_s: 65.2,
            runs_active: 2,
            runs_waiting: 0,
            runs_queued: 0,
            plugins_loaded: 5,
            sandbox_engine: EngineStatus {
                reachable: false,
                address: "unix:///var/run/docker.sock".into(),
                error: Some("no such file".into()),
                warnings: vec!["the engine's runc is version 1.1.5".into()],
                pool: crate::api::PoolStatus {
                    target: 2,
                    ready: 1,
                    creating: 1,
                    served: 7,
                    last_error: None,
                },
            },
            engines: vec![
                crate::api::EngineSummary {
                    name: "local".into(),
                    address: "unix:///var/run/docker.sock".into(),
                    reachable: true,
                    containers: 3,
                    capacity: Some(20),
                    last_error: None,
                    pool: Default::default(),
                },
                crate::api::EngineSummary {
                    name: "far".into(),
                    address: "tcp://10.0.0.2:2376 (TLS)".into(),
                    reachable: false,
                    containers: 1,
                    capacity: None,
                    last_error: Some("connection refused".into()),
                    pool: Default::default(),
                },
            ],
            socket: "/run/agentd/agentd.sock".into(),
            state_dir: "/var/lib/agentd".into(),
            accepting_runs: true,
            plugin_cache: crate::api::CacheStatus {
                enabled: true,
                hits: 4,
                misses: 1,
            },
            token_budgets: Default::default(),
        });
        assert!(
            text.contains("plugins    5 loaded (4 from the compile cache, 1 compiled)\n"),
            "{text}"
        );
        assert!(text.contains("uptime     1m05s\n"), "{text}");
        assert!(
            text.contains("tokens     0 today (UTC); no daily budget\n"),
            "{text}"
        );
        assert!(text.contains("runs       2 running, 0 queued\n"), "{text}");
        assert!(
            text.contains("pool       1 of 2 ready, 1 being made, 7 served\n"),
            "{text}"
        );
        assert!(
            text.contains("sandbox    unix:///var/run/docker.sock (unreachable: no such file)\n"),
            "{text}"
        );
        assert!(
            text.ends_with("warning    the engine's runc is version 1.1.5\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "engine     local unix:///var/run/docker.sock reachable, 3/20 containers\n\
                 engine     far tcp://10.0.0.2:2376 (TLS) unreachable, 1/unbounded containers, \
                 last error: connection refused\n"
            ),
            "{text}"
        );
    }
}
