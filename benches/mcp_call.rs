//! One tool call through a run's `ToolBox`: a tool component (the Rust
//! `echo` plugin, warm instance) against the tools of two MCP servers over
//! stdio on this machine: server-everything's `echo` (Node) and the Python
//! SDK server's `add` (`tests/mcp/python_server.py`), and a bare server
//! written by hand (`tests/mcp/raw_echo_server.py`: JSON lines, no SDK),
//! whose own work is a few microseconds of Python, so its figure is about
//! agentd's side of a call plus the pipe. The MCP figures are
//! the whole round trip: agentd's side (arguments parsed, the JSON-RPC
//! request written to the child's stdin, the answer read, the content
//! turned into the observation) plus the server's own handling, which for
//! these servers is most of it.
//!
//! Run: `cargo bench --bench mcp_call` (builds the plugins; the servers are
//! installed by scripts/ensure-mcp-servers.sh).

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use agentd::agent::ToolProvider;
use agentd::mcp::{McpClients, McpSettings, ServerSettings, Transport};
use agentd::plugin::clock::StepClock;
use agentd::plugin::tool::ToolBox;
use agentd::plugin::{EngineLimits, PluginHost};
use agentd::sandbox::{NoSandbox, SandboxProvider};
use agentd::testkit::build_plugins;
use agentd::testkit::stats::percentile;

const CALLS: usize = 2000;
const MCP_CALLS: usize = 500;

fn stdio(name: &str, command: &str, args: &[&str]) -> ServerSettings {
    ServerSettings {
        name: name.into(),
        transport: Transport::Stdio {
            command: command.into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: Default::default(),
            cwd: None,
        },
        enabled: true,
        timeout: Duration::from_secs(30),
        start_timeout: Duration::from_secs(30),
        tools: None,
        per_run: false,
    }
}

async fn time_calls(
    tools: &mut ToolBox,
    name: &str,
    args: &str,
    n: usize,
    expect: &str,
) -> anyhow::Result<(Duration, Duration)> {
    let mut took = Vec::with_capacity(n);
    for i in 0..n + 20 {
        let t = Instant::now();
        let out = tools.invoke(name, args).await;
        let elapsed = t.elapsed();
        let out = out.map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        anyhow::ensure!(out.contains(expect), "{name}: {out}");
        if i >= 20 {
            took.push(elapsed);
        }
    }
    took.sort();
    Ok((percentile(&took, 0.5), percentile(&took, 0.99)))
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> anyhow::Result<()> {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(repo.join("scripts/ensure-mcp-servers.sh"))
        .arg("--print")
        .output()?;
    anyhow::ensure!(out.status.success(), "ensure-mcp-servers.sh failed");
    let text = String::from_utf8(out.stdout)?;
    let mut lines = text.lines();
    let everything = lines.next().unwrap_or_default().to_string();
    let python = lines.next().unwrap_or_default().to_string();
    let py_server = repo.join("tests/mcp/python_server.py");
    let raw_server = repo.join("tests/mcp/raw_echo_server.py");

    let built = build_plugins(&repo)?;
    let plugins = tempfile::tempdir()?;
    std::fs::copy(built.join("echo.wasm"), plugins.path().join("echo.wasm"))?;
    let host = PluginHost::new(EngineLimits {
        max_concurrent_runs: 8,
    })?;
    let report = host.load_dir(plugins.path()).await?;
    anyhow::ensure!(report.failed.is_empty(), "{:?}", report.failed);
    let echo = host
        .snapshot()
        .tool("echo")
        .ok_or_else(|| anyhow::anyhow!("echo not loaded"))?;

    let mut settings = McpSettings::default();
    for s in [
        stdio("everything", "node", &[&everything, "stdio"]),
        stdio("py", &python, &[&py_server.display().to_string()]),
        stdio("raw", "python3", &[&raw_server.display().to_string()]),
    ] {
        settings.servers.insert(s.name.clone(), s);
    }
    let clients = McpClients::start(settings);

    let figures = tokio::spawn(async move {
        let hosted = clients
            .open(
                "bench",
                &[
                    "mcp:everything/echo".to_string(),
                    "mcp:py/add".to_string(),
                    "mcp:raw/echo".to_string(),
                ],
            )
            .await
            .map_err(|e| anyhow::anyhow!(e))?;
        let sandbox = NoSandbox::new("bench").for_run("bench");
        let mut tools = ToolBox::new(
            vec![echo],
            sandbox,
            StepClock::new(),
            Default::default(),
            std::sync::Arc::new(agentd::plugin::NoHuman("a benchmark asks no one")),
        )
        .with_hosted(hosted);
        let plugin = time_calls(&mut tools, "echo", r#"{"text":"x"}"#, CALLS, "x").await?;
        let node = time_calls(
            &mut tools,
            "mcp__everything__echo",
            r#"{"message":"x"}"#,
            MCP_CALLS,
            "Echo: x",
        )
        .await?;
        let py = time_calls(
            &mut tools,
            "mcp__py__add",
            r#"{"a":1,"b":2}"#,
            MCP_CALLS,
            "3",
        )
        .await?;
        let raw = time_calls(&mut tools, "mcp__raw__echo", r#"{"text":"x"}"#, CALLS, "x").await?;
        drop(tools);
        clients.stop(Duration::from_secs(5)).await;
        anyhow::Ok([plugin, node, py, raw])
    })
    .await??;

    println!("mcp_call: one tool call through a run's ToolBox, release build");
    println!("| tool | p50 | p99 |");
    println!("|---|---|---|");
    let us = |d: Duration| format!("{:.1} µs", d.as_secs_f64() * 1e6);
    for ((what, n), (p50, p99)) in [
        ("tool component `echo` (Rust, warm instance)", CALLS),
        ("MCP stdio: server-everything `echo` (Node)", MCP_CALLS),
        ("MCP stdio: Python SDK server `add`", MCP_CALLS),
        (
            "MCP stdio: bare JSON-lines server `echo` (agentd's side + pipe)",
            CALLS,
        ),
    ]
    .iter()
    .zip(figures)
    {
        println!("| {what}, {n} calls | {} | {} |", us(p50), us(p99));
    }
    Ok(())
}
