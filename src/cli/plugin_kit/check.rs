//! `agentd plugin check FILE.wasm`: the daemon's load of one component,
//! without a daemon, reported whole: world, contract version, metadata, the
//! tool's spec (its parameters checked as a JSON Schema) or the strategy's
//! defaults, the imports and the grants they need, compile time and size.
//! Every problem found is listed, not only the first, and any problem makes
//! the exit status 1: a script (or CI) can gate on it.

use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use super::{usage, CheckArgs};
use crate::plugin::import_needs::{self, ImportNeed};
use crate::plugin::tool_schema::schema_problems;
use crate::plugin::world::{self, WorldKind};
use crate::plugin::{grants_for, EngineLimits, LoadedPlugin, Loader, MAX_COMPONENT_BYTES};

/// What `check` found; `--json` prints it as is.
#[derive(Debug, Serialize)]
pub struct Report {
    pub file: String,
    pub size_bytes: u64,
    pub sha256: Option<String>,
    /// `tool`, `http-tool` (a tool that imports `wasi:http`) or `strategy`,
    /// from the component's exports; `None` when it exports neither.
    pub world: Option<&'static str>,
    /// The contract version its exports are of (`0.2.0`).
    pub contract: Option<&'static str>,
    pub metadata: Option<MetadataView>,
    /// A tool's `spec()`, its parameters as JSON.
    pub spec: Option<SpecView>,
    /// A strategy's `defaults()`.
    pub defaults: Option<DefaultsView>,
    pub imports: Vec<ImportNeed>,
    pub exports: Vec<String>,
    /// Grants an operator must set for the imports to do anything
    /// (`[plugins.<name>] allow_hosts`, ...).
    pub grants: Vec<&'static str>,
    pub compile_ms: Option<f64>,
    pub probe_ms: Option<f64>,
    /// Everything that stops the daemon from serving the component, or
    /// makes it misbehave once served; empty when it is sound.
    pub problems: Vec<String>,
    /// Things that work but probably should not be so.
    pub warnings: Vec<String>,
    pub ok: bool,
}

#[derive(Debug, Serialize)]
pub struct MetadataView {
    pub name: String,
    pub version: String,
    pub description: String,
}

#[derive(Debug, Serialize)]
pub struct SpecView {
    pub name: String,
    pub description: String,
    pub parameters: serde_json::Value,
}

#[derive(Debug, Serialize)]
pub struct DefaultsView {
    pub system_prompt: Option<String>,
    pub next_step_prompt: Option<String>,
    pub max_steps: Option<u32>,
    pub tool_choice: Option<crate::chat::ToolChoice>,
    pub special_tools: Option<Vec<String>>,
}

pub async fn run(args: &CheckArgs) -> i32 {
    let config = match super::call::load_config(args.config.as_deref()) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let loader = match Loader::with_settings(
        EngineLimits {
            max_concurrent_runs: 1,
        },
        config.plugins,
    ) {
        Ok(l) => l,
        Err(e) => return usage(e),
    };
    let report = match check(&loader, &args.file).await {
        Ok(r) => r,
        Err(e) => return usage(e),
    };
    if args.json {
        match serde_json::to_string_pretty(&report) {
            Ok(s) => println!("{s}"),
            Err(e) => return usage(format!("cannot encode the report: {e}")),
        }
    } else {
        print!("{}", render(&report));
    }
    if report.ok {
        0
    } else {
        1
    }
}

/// Checks the component at `path` with `loader`; `Err` only when the file
/// cannot be read at all.
pub async fn check(loader: &Loader, path: &Path) -> Result<Report, String> {
    let meta =
        std::fs::metadata(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut report = Report {
        file: path.display().to_string(),
        size_bytes: meta.len(),
        sha256: None,
        world: None,
        contract: None,
        metadata: None,
        spec: None,
        defaults: None,
        imports: Vec::new(),
        exports: Vec::new(),
        grants: Vec::new(),
        compile_ms: None,
        probe_ms: None,
        problems: Vec::new(),
        warnings: Vec::new(),
        ok: false,
    };
    if let Err(e) = crate::plugin::trust::check_file(path, &meta) {
        report.warnings.push(format!(
            "the daemon would refuse this file in its plugins folder: {e}"
        ));
    }
    if meta.len() > MAX_COMPONENT_BYTES {
        report.problems.push(format!(
            "{} bytes is larger than the {MAX_COMPONENT_BYTES} bytes a plugin may be",
            meta.len()
        ));
        return Ok(report);
    }
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    report.sha256 = Some(hex(&sha2_digest(&bytes)));
    let compiled = match loader.compile(path, bytes).await {
        Ok(c) => c,
        Err(e) => {
            report.problems.push(e.to_string());
            return Ok(report);
        }
    };
    report.compile_ms = Some(ms(compiled.compile_time));
    report.exports = compiled.exports(loader.engine());
    report.imports = compiled
        .imports(loader.engine())
        .iter()
        .map(|i| import_needs::classify(i))
        .collect();
    for need in &report.imports {
        if !need.provided {
            report.problems.push(format!(
                "imports `{}`, which agentd does not provide: the component cannot load in agentd",
                need.import
            ));
        }
    }
    report.grants = grants_for(&compiled.imports(loader.engine()));
    let uses_http = report
        .imports
        .iter()
        .any(|i| i.import.starts_with("wasi:http/outgoing-handler"));
    if let Some((kind, contract)) = world::detect(&report.exports) {
        report.contract = Some(contract.as_str());
        report.world = Some(match kind {
            WorldKind::Strategy => "strategy",
            WorldKind::Tool if uses_http => "http-tool",
            WorldKind::Tool => "tool",
        });
    }
    let started = Instant::now();
    let probed = loader.probe(path, &compiled).await;
    report.probe_ms = Some(ms(started.elapsed()));
    match probed {
        Ok(plugin) => describe(&mut report, &plugin),
        Err(e) => report.problems.push(e.to_string()),
    }
    report.ok = report.problems.is_empty();
    Ok(report)
}

fn describe(report: &mut Report, plugin: &LoadedPlugin) {
    let meta = plugin.meta();
    report.metadata = Some(MetadataView {
        name: meta.name.clone(),
        version: meta.version.clone(),
        description: meta.description.clone(),
    });
    if meta.description.trim().is_empty() {
        report
            .warnings
            .push("metadata().description is empty: listings show nothing for it".into());
    }
    match plugin {
        LoadedPlugin::Tool(tool) => {
            let spec = &tool.spec;
            for p in schema_problems(&spec.parameters) {
                report.problems.push(format!("spec().parameters: {p}"));
            }
            if spec.description.trim().is_empty() {
                report.problems.push(
                    "spec().description is empty: the model is told nothing about when to call the tool".into(),
                );
            }
            report.spec = Some(SpecView {
                name: spec.name.clone(),
                description: spec.description.clone(),
                parameters: serde_json::from_str(&spec.parameters)
                    .unwrap_or(serde_json::Value::String(spec.parameters.clone())),
            });
        }
        LoadedPlugin::Strategy(strategy) => {
            let d = &strategy.defaults;
            report.defaults = Some(DefaultsView {
                system_prompt: d.system_prompt.clone(),
                next_step_prompt: d.next_step_prompt.clone(),
                max_steps: d.max_steps,
                tool_choice: d.tool_choice,
                special_tools: d.special_tools.clone(),
            });
            if d.max_steps == Some(0) {
                report
                    .warnings
                    .push("defaults().max_steps is 0: runs get 1 step".into());
            }
        }
    }
}

/// The report for people.
pub fn render(r: &Report) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "file       {} ({}{})",
        r.file,
        size_text(r.size_bytes),
        r.sha256
            .as_deref()
            .map(|s| format!(", sha256 {}", &s[..16.min(s.len())]))
            .unwrap_or_default()
    );
    if let Some(world) = r.world {
        let _ = writeln!(
            out,
            "world      {world} (agentd:plugin@{})",
            r.contract.unwrap_or("?")
        );
    }
    if let Some(m) = &r.metadata {
        let _ = writeln!(
            out,
            "plugin     {} {}: {}",
            m.name, m.version, m.description
        );
    }
    if let Some(s) = &r.spec {
        let _ = writeln!(out, "spec       {}: {}", s.name, first_line(&s.description));
        let _ = writeln!(out, "parameters {}", s.parameters);
    }
    if let Some(d) = &r.defaults {
        let _ = writeln!(
            out,
            "defaults   max_steps {}, tool_choice {}, special_tools {}",
            d.max_steps.map_or("-".into(), |n| n.to_string()),
            d.tool_choice.map_or("-", |c| c.as_str()),
            d.special_tools
                .as_ref()
                .map_or("-".into(), |t| t.join(", "))
        );
        if let Some(p) = &d.system_prompt {
            let _ = writeln!(out, "           system prompt: {}", first_line(p));
        }
    }
    // The contract's imports, and those that need a grant or cannot be
    // had, one a line; the plain WASI ones every toolchain brings along
    // (streams, stdio, clocks) on one line at the end.
    let (noted, plain): (Vec<&ImportNeed>, Vec<&ImportNeed>) = r
        .imports
        .iter()
        .partition(|n| !n.grants.is_empty() || !n.provided || !n.import.starts_with("wasi:"));
    for (i, need) in noted.iter().enumerate() {
        let label = if i == 0 { "imports" } else { "" };
        let grant = if need.grants.is_empty() {
            String::new()
        } else {
            format!(" [grant: {}]", need.grants.join(", "))
        };
        let _ = writeln!(out, "{label:<10} {}{grant}: {}", need.import, need.note);
    }
    let mut notes: Vec<&str> = plain.iter().map(|n| n.note).collect();
    notes.sort_unstable();
    notes.dedup();
    for (i, note) in notes.iter().enumerate() {
        let names: Vec<&str> = plain
            .iter()
            .filter(|n| n.note == *note)
            .map(|n| n.import.as_str())
            .collect();
        let label = if noted.is_empty() && i == 0 {
            "imports"
        } else {
            ""
        };
        let _ = writeln!(out, "{label:<10} {}: {note}", names.join(", "));
    }
    if !r.grants.is_empty() {
        let _ = writeln!(
            out,
            "grants     [plugins.<name>] {} reach these imports; without them the plugin sees nothing there",
            r.grants.join(", ")
        );
    }
    if let Some(c) = r.compile_ms {
        let _ = writeln!(
            out,
            "time       compile {c:.1} ms, probe {:.1} ms",
            r.probe_ms.unwrap_or(0.0)
        );
    }
    for w in &r.warnings {
        let _ = writeln!(out, "warning    {w}");
    }
    if r.ok {
        let _ = writeln!(out, "ok         the daemon would load it");
    } else {
        let _ = writeln!(out, "{} problem(s):", r.problems.len());
        for p in &r.problems {
            let _ = writeln!(out, "  - {p}");
        }
    }
    out
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

fn size_text(n: u64) -> String {
    if n >= 1 << 20 {
        format!("{:.1} MiB", n as f64 / (1 << 20) as f64)
    } else if n >= 1 << 10 {
        format!("{:.1} KiB", n as f64 / 1024.0)
    } else {
        format!("{n} bytes")
    }
}

fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn sha2_digest(bytes: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
