use super::*;
use crate::chat::ToolChoice;

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(text, Path::new("/etc/agentd/agentd.toml"))
}

#[test]
fn defaults_have_the_bundled_agents() {
    let c = Config::defaults();
    let toolcall = c.agent("toolcall").expect("toolcall");
    assert_eq!(
        toolcall.system_prompt, None,
        "the prompts are the strategy plugin's defaults, not the host's"
    );
    assert_eq!(toolcall.tools, ["terminate"]);
    assert_eq!(toolcall.max_steps, None, "defers to the strategy's default");
    let manus = c.agent("manus").expect("manus");
    assert_eq!(manus.max_steps, Some(20));
    assert_eq!(manus.max_observe, Some(10000));
    assert_eq!(
        manus.tools,
        ["python_execute", "str_replace_editor", "bash", "terminate"]
    );
    let react = c.agent("react").expect("react");
    assert_eq!(react.strategy, "react");
    assert_eq!(
        react.tools, manus.tools,
        "Manus's tools, for models without tool calling"
    );
    assert_eq!(react.max_observe, Some(10000));
    assert_eq!(
        (react.system_prompt.as_deref(), react.max_steps),
        (None, None),
        "the prompt (which lists the tools) and step limit are the strategy's"
    );
    let planner = c.agent("planner").expect("planner");
    assert_eq!(planner.strategy, "planning");
    assert_eq!(planner.tools, manus.tools, "Manus's tools");
    assert_eq!(planner.max_observe, Some(10000));
    assert_eq!(
        (planner.system_prompt.as_ref(), planner.max_steps),
        (None, None),
        "the planning strategy's own defaults"
    );
    assert_eq!(c.sandbox, SandboxConfig::default());
    assert_eq!(c.daemon.step_timeout, Duration::from_secs(60));
}

#[test]
fn unknown_key_names_file_line_and_key() {
    let err = parse("[llm]\nmodel = \"m\"\n\n[agents.a]\nmax_stepz = 3\n").expect_err("typo");
    let msg = err.to_string();
    assert!(msg.starts_with("/etc/agentd/agentd.toml:5"), "{msg}");
    assert!(msg.contains("max_stepz"), "{msg}");
}

#[test]
fn unknown_llm_key_is_an_error() {
    let msg = parse("[llm]\nmodle = \"m\"\n")
        .expect_err("typo")
        .to_string();
    assert!(msg.contains("modle"), "{msg}");
    assert!(msg.contains(":2"), "{msg}");
    let msg = parse("[llm.manus]\nmodle = \"m\"\n")
        .expect_err("typo")
        .to_string();
    assert!(
        msg.contains("[llm.manus]") && msg.contains("modle"),
        "{msg}"
    );
}

#[test]
fn wrong_type_is_an_error() {
    let msg = parse("[agents.a]\nmax_steps = \"ten\"\n")
        .expect_err("type")
        .to_string();
    assert!(msg.contains(":2") && msg.contains("invalid type"), "{msg}");
    let msg = parse("[agents.a]\ntool_choice = \"sometimes\"\n")
        .expect_err("enum")
        .to_string();
    assert!(msg.contains("sometimes"), "{msg}");
}

#[test]
fn llm_overrides_apply_key_by_key() {
    let c = parse(
        "[llm]\nmodel = \"base\"\nbase_url = \"http://x/v1\"\napi_key = \"k\"\ntemperature = 0.5\n\
         [llm.Manus]\nmodel = \"special\"\n",
    )
    .expect("valid");
    let manus = c.llm.for_agent("manus");
    assert_eq!(manus.model, "special");
    assert_eq!(manus.base_url, "http://x/v1");
    assert_eq!(manus.temperature, Some(0.5));
    assert_eq!(c.llm.for_agent("toolcall").model, "base");
}

#[test]
fn agent_tables_override_bundled_and_define_new_agents() {
    let c = parse(
        "[agents.toolcall]\nmax_steps = 3\n[agents.mine]\nstrategy = \"s\"\ntools = [\"a\", \"b\"]\ntool_choice = \"required\"\n",
    )
    .expect("valid");
    let t = c.agent("toolcall").expect("toolcall");
    assert_eq!(t.max_steps, Some(3));
    assert_eq!(t.system_prompt, None);
    let mine = c.agent("mine").expect("mine");
    assert_eq!(mine.tools, ["a", "b"]);
    assert_eq!(mine.tool_choice, Some(ToolChoice::Required));
    assert_eq!(mine.special_tools, None, "defers to the strategy");
    assert_eq!(mine.duplicate_threshold, 2);
}

#[test]
fn semantic_errors_name_the_line_too() {
    let msg = parse("[llm]\nmodel = \"m\"\n\n[agents.a]\nstrategy = \"s\"\nmax_steps = 0\n")
        .expect_err("zero steps")
        .to_string();
    assert!(
        msg.starts_with("/etc/agentd/agentd.toml:6: [agents.a] max_steps"),
        "{msg}"
    );
    let msg = parse("[daemon]\n\nstep_timeout = -1\n")
        .expect_err("negative")
        .to_string();
    assert!(msg.starts_with("/etc/agentd/agentd.toml:3:"), "{msg}");
}

#[test]
fn nonsense_values_are_refused() {
    assert!(parse("[agents.a]\nmax_steps = 0\n").is_err());
    assert!(parse("[daemon]\nstep_timeout = -1\n").is_err());
    assert!(parse("[llm]\ntimeout = 0\n").is_err());
}

#[test]
fn huge_timeouts_are_refused_not_a_panic() {
    assert!(parse("[daemon]\nstep_timeout = 1e20\n").is_err());
    assert!(parse("[llm]\ntimeout = 1e20\n").is_err());
}

#[test]
fn an_override_key_setting_replaces_both_key_settings() {
    let c = parse(
        "[llm]\napi_key = \"sk-base\"\n[llm.manus]\napi_key_env = \"AGENTD_TEST_UNSET_KEY_VAR\"\n",
    )
    .expect("valid");
    assert_eq!(
        c.llm.for_agent("manus").api_key,
        None,
        "the base key is not sent to the agent that names its own"
    );
    assert_eq!(
        c.llm.for_agent("toolcall").api_key.as_deref(),
        Some("sk-base")
    );
}

#[test]
fn an_llm_override_naming_no_agent_is_refused_with_its_line() {
    let msg = parse("[llm]\nmodel = \"m\"\n\n[llm.mnaus]\nmodel = \"x\"\n")
        .expect_err("typo in the agent name")
        .to_string();
    assert!(
        msg.starts_with("/etc/agentd/agentd.toml:4: [llm.mnaus] names no agent"),
        "{msg}"
    );
    assert!(
        msg.contains("known agents: manus, planner, react, toolcall"),
        "{msg}"
    );
    // Agents from the file count, in any case.
    let c =
        parse("[agents.Researcher]\nstrategy = \"toolcall\"\n[llm.researcher]\nmodel = \"r\"\n")
            .expect("an agent of the file");
    assert_eq!(c.llm.for_agent("Researcher").model, "r");
}

#[test]
fn agents_named_like_llm_keys_take_overrides_under_their_own_table() {
    let c = parse(
        "[llm]\nmodel = \"base\"\n[agents.timeout]\nstrategy = \"toolcall\"\n[agents.timeout.llm]\nmodel = \"x\"\ntimeout = 5\n",
    )
    .expect("valid");
    let t = c.llm.for_agent("timeout");
    assert_eq!(t.model, "x");
    assert_eq!(t.request_timeout, Duration::from_secs(5));
    assert_eq!(c.llm.for_agent("toolcall").model, "base");
    // The table alone defines the agent, as any [agents.X] key does.
    let c = parse("[agents.model.llm]\nmodel = \"y\"\n").expect("valid");
    assert!(c.agent("model").is_some());
    assert_eq!(c.llm.for_agent("model").model, "y");
    // Its keys are checked like [llm]'s, with the table named.
    let msg = parse("[agents.timeout.llm]\nmodel = \"x\"\ntimeout = 0\n")
        .expect_err("zero timeout")
        .to_string();
    assert!(
        msg.starts_with("/etc/agentd/agentd.toml:3: [agents.timeout.llm] timeout"),
        "{msg}"
    );
    let msg = parse("[agents.timeout.llm]\nmodle = \"x\"\n")
        .expect_err("typo")
        .to_string();
    assert!(msg.contains(":2") && msg.contains("modle"), "{msg}");
}

#[test]
fn overrides_set_twice_for_one_agent_are_refused_naming_both() {
    let msg = parse("[llm.manus]\nmodel = \"a\"\n\n[agents.manus.llm]\nmodel = \"b\"\n")
        .expect_err("both layouts")
        .to_string();
    assert!(
        msg.starts_with("/etc/agentd/agentd.toml:4: [agents.manus.llm] and [llm.manus] (line 1)"),
        "{msg}"
    );
    let msg = parse("[llm.Manus]\nmodel = \"a\"\n[llm.manus]\nmodel = \"b\"\n")
        .expect_err("one agent, two cases")
        .to_string();
    assert!(msg.contains("[llm.manus] and [llm.Manus]"), "{msg}");
}

#[test]
fn a_base_url_without_http_scheme_is_refused_with_its_line() {
    let msg = parse("[llm]\nmodel = \"m\"\nbase_url = \"localhost:11434/v1\"\n")
        .expect_err("no scheme")
        .to_string();
    assert!(
        msg.starts_with("/etc/agentd/agentd.toml:3: [llm] base_url `localhost:11434/v1`"),
        "{msg}"
    );
    assert!(msg.contains("http://localhost:11434/v1"), "a hint: {msg}");
    let msg = parse("[llm.manus]\n\nbase_url = \"ftp://host/v1\"\n")
        .expect_err("not http")
        .to_string();
    assert!(
        msg.starts_with("/etc/agentd/agentd.toml:3: [llm.manus] base_url"),
        "{msg}"
    );
    assert!(parse("[llm]\nbase_url = \"http://\"\n").is_err());
    assert!(parse("[llm]\nbase_url = \"http://127.0.0.1:8080/v1\"\n").is_ok());
}

#[test]
fn retry_keys_are_read() {
    let c = parse("[llm]\ntimeout_retries = 0\nretry_max_wait = 5\nmax_retries = 2\n[llm.manus]\nretry_max_wait = 0\n")
        .expect("valid");
    let retry = c.llm.for_agent("toolcall").retry;
    assert_eq!(retry.timeout_retries, 0);
    assert_eq!(retry.max_wait, Duration::from_secs(5));
    assert_eq!(retry.max_retries, 2);
    assert_eq!(c.llm.for_agent("manus").retry.max_wait, Duration::ZERO);
    let defaults = Config::defaults().llm.for_agent("toolcall").retry;
    assert_eq!(defaults.timeout_retries, 1);
    assert_eq!(defaults.max_wait, Duration::from_secs(120));
    let msg = parse("[llm]\n\nretry_max_wait = -1\n")
        .expect_err("negative")
        .to_string();
    assert!(
        msg.starts_with("/etc/agentd/agentd.toml:3: [llm] retry_max_wait"),
        "{msg}"
    );
}

/// PEM framing around the first 48 bytes of a certificate: PEM that parses,
/// DER that does not.
const TEST_CA_PEM: &str = "-----BEGIN CERTIFICATE-----
MIIBkTCCATegAwIBAgIUQ3Y0GcNnqVZ4s5c5c0JtLq7Xn7YwCgYIKoZIzj0EAwIw
-----END CERTIFICATE-----
";

#[test]
fn ca_file_is_checked_at_load_and_relative_to_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("agentd.toml");
    let msg = Config::parse("[llm]\nca_file = \"missing.pem\"\n", &file)
        .expect_err("missing")
        .to_string();
    let expected = format!(
        "{}:2: [llm] ca_file {}: cannot read",
        file.display(),
        dir.path().join("missing.pem").display()
    );
    assert!(msg.starts_with(&expected), "{msg}");
    std::fs::write(dir.path().join("empty.pem"), "not a certificate\n").expect("write");
    let msg = Config::parse("[llm.manus]\nca_file = \"empty.pem\"\n", &file)
        .expect_err("empty")
        .to_string();
    assert!(
        msg.contains(":2: [llm.manus] ca_file") && msg.contains("no PEM certificate"),
        "{msg}"
    );
    std::fs::write(dir.path().join("bad.pem"), TEST_CA_PEM).expect("write");
    let msg = Config::parse("[llm]\nca_file = \"bad.pem\"\n", &file)
        .expect_err("truncated certificate")
        .to_string();
    assert!(
        msg.contains(":2: [llm] ca_file")
            && msg.contains("certificate 1 is not a usable CA certificate: BadEncoding"),
        "{msg}"
    );
}

#[test]
fn a_good_ca_file_loads_and_reaches_the_settings() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("agentd.toml");
    let ca = rcgen::generate_simple_self_signed(vec!["internal-ca".to_string()]).expect("CA");
    std::fs::write(dir.path().join("ca.pem"), ca.cert.pem()).expect("write");
    let c = Config::parse("[llm]\nca_file = \"ca.pem\"\n", &file).expect("valid");
    assert_eq!(
        c.llm.for_agent("toolcall").ca_file,
        Some(dir.path().join("ca.pem")),
        "relative to the configuration file"
    );
}

#[test]
fn plugins_memory_limit_defaults_to_256_mib_and_takes_sizes() {
    assert_eq!(Config::defaults().plugins.memory_limit, 256 << 20);
    let c = parse("[plugins]\nmemory_limit = \"64m\"\n").expect("size with a unit");
    assert_eq!(c.plugins.memory_limit, 64 << 20);
    let c = parse("[plugins]\nmemory_limit = 33554432\n").expect("bytes");
    assert_eq!(c.plugins.memory_limit, 32 << 20);
}

#[test]
fn bad_plugins_memory_limit_names_the_line_and_key() {
    for bad in ["\"lots\"", "\"1k\"", "\"8g\""] {
        let msg = parse(&format!(
            "[llm]\nmodel = \"m\"\n[plugins]\nmemory_limit = {bad}\n"
        ))
        .expect_err(bad)
        .to_string();
        assert!(
            msg.starts_with("/etc/agentd/agentd.toml:4") && msg.contains("[plugins] memory_limit"),
            "{msg}"
        );
    }
}

#[test]
fn unknown_plugins_key_is_refused() {
    let msg = parse("[plugins]\nmemory_limt = \"64m\"\n")
        .expect_err("typo")
        .to_string();
    assert!(msg.contains("memory_limt"), "{msg}");
}

#[test]
fn run_limits_have_defaults_that_follow_the_sandbox_output_limit() {
    let l = Config::defaults().daemon.run_limits;
    assert_eq!(l.max_run_time, Duration::from_secs(3600));
    assert_eq!(l.max_run_bytes, 64 << 20);
    assert_eq!(l.max_tool_calls_per_step, 32);
    assert_eq!(l.max_host_calls_per_step, 1024);
    assert_eq!(l.max_tool_arguments_bytes, 256 << 10);
    assert_eq!(l.max_tool_result_bytes, 1 << 20, "[sandbox] output_limit");
    assert_eq!(l.max_message_bytes, 2 << 20, "twice a tool result");
    let small = parse("[sandbox]\noutput_limit = 1000\n").expect("valid");
    let l = small.daemon.run_limits;
    assert_eq!(l.max_tool_result_bytes, 64 << 10, "at least 64 KiB");
    assert_eq!(l.max_message_bytes, 1 << 20, "at least 1 MiB");
}

#[test]
fn run_limits_are_set_in_daemon_and_three_per_agent() {
    let c = parse(
        "[daemon]\nmax_run_time = 90\nmax_run_bytes = 10485760\nmax_tool_calls_per_step = 4\n\
         max_host_calls_per_step = 200\n\
         max_message_bytes = 524288\nmax_tool_arguments_bytes = 8192\nmax_tool_result_bytes = 65536\n\n\
         [agents.quick]\nmax_run_time = 2.5\nmax_tool_calls_per_step = 1\nmax_host_calls_per_step = 50\n",
    )
    .expect("valid");
    let l = c.daemon.run_limits;
    assert_eq!(l.max_run_time, Duration::from_secs(90));
    assert_eq!(l.max_run_bytes, 10 << 20);
    assert_eq!(l.max_tool_calls_per_step, 4);
    assert_eq!(l.max_host_calls_per_step, 200);
    assert_eq!(l.max_message_bytes, 512 << 10);
    assert_eq!(l.max_tool_arguments_bytes, 8 << 10);
    assert_eq!(l.max_tool_result_bytes, 64 << 10);
    let quick = l.for_agent(c.agent("quick").expect("agent"));
    assert_eq!(quick.max_run_time, Duration::from_millis(2500));
    assert_eq!(quick.max_tool_calls_per_step, 1);
    assert_eq!(quick.max_host_calls_per_step, 50);
    assert_eq!(quick.max_run_bytes, 10 << 20, "the rest is the daemon's");
    let manus = l.for_agent(c.agent("manus").expect("agent"));
    assert_eq!(manus, l);
}

#[test]
fn run_limits_that_cannot_work_are_refused_naming_the_key() {
    for (text, key) in [
        ("[daemon]\nmax_run_time = 0\n", "[daemon] max_run_time"),
        ("[daemon]\nmax_run_time = -3\n", "[daemon] max_run_time"),
        (
            "[daemon]\nmax_tool_calls_per_step = 0\n",
            "[daemon] max_tool_calls_per_step",
        ),
        (
            "[daemon]\nmax_message_bytes = 100\n",
            "[daemon] max_message_bytes",
        ),
        (
            "[daemon]\nmax_message_bytes = 1048576\n",
            "[daemon] max_message_bytes (1048576) must exceed max_tool_result_bytes",
        ),
        ("[daemon]\nmax_run_bytes = 1000\n", "[daemon] max_run_bytes"),
        (
            "[daemon]\nmax_tool_arguments_bytes = 10\n",
            "[daemon] max_tool_arguments_bytes",
        ),
        ("[agents.a]\nmax_run_time = 0\n", "[agents.a] max_run_time"),
        (
            "[agents.a]\nmax_tool_calls_per_step = 0\n",
            "[agents.a] max_tool_calls_per_step",
        ),
        (
            "[daemon]\nmax_host_calls_per_step = 0\n",
            "[daemon] max_host_calls_per_step",
        ),
        (
            "[agents.a]\nmax_host_calls_per_step = 0\n",
            "[agents.a] max_host_calls_per_step",
        ),
    ] {
        let msg = parse(text).expect_err(text).to_string();
        assert!(msg.contains(key), "{text}: {msg}");
        assert!(
            msg.starts_with("/etc/agentd/agentd.toml:2:"),
            "{text}: {msg}"
        );
    }
}

#[test]
fn sandbox_containment_keys_are_parsed() {
    let c = parse(
        "[llm]\nmodel = \"m\"\n\n[sandbox]\nuser = \"1000:1000\"\ndisk_limit = \"256m\"\nmax_open_files = 4096\n",
    )
    .expect("valid");
    assert_eq!(c.sandbox.user, "1000:1000");
    assert_eq!(c.sandbox.disk_limit, "256m");
    assert_eq!(c.sandbox.max_open_files, 4096);
    let d = Config::defaults();
    assert_eq!(
        (
            d.sandbox.user.as_str(),
            d.sandbox.disk_limit.as_str(),
            d.sandbox.max_open_files
        ),
        ("sandbox", "1g", 1024)
    );
    let err = parse("[llm]\nmodel = \"m\"\n\n[sandbox]\nmax_open_files = \"many\"\n")
        .expect_err("wrong type");
    assert!(
        err.to_string().contains("agentd.toml:5"),
        "names the line: {err}"
    );
}

#[test]
fn the_warm_pool_defaults_to_two_and_refuses_a_fleet() {
    assert_eq!(Config::defaults().sandbox.pool_size, 2);
    let off = parse("[llm]\nmodel = \"m\"\n\n[sandbox]\npool_size = 0\n").expect("valid");
    assert_eq!(off.sandbox.pool_size, 0);
    let err = parse("[llm]\nmodel = \"m\"\n\n[sandbox]\npool_size = 500\n").expect_err("too many");
    assert!(
        err.to_string()
            .contains("[sandbox] pool_size 500 is more than 64"),
        "{err}"
    );
}

#[test]
fn api_limits_have_defaults_and_refuse_nonsense() {
    let d = Config::defaults().daemon;
    assert_eq!(d.max_connections, 256);
    assert_eq!(d.max_queued_runs, 1024);
    assert_eq!(d.header_timeout, Duration::from_secs(10));
    assert_eq!(d.write_timeout, Duration::from_secs(30));
    let c = parse(
        "[daemon]\nmax_connections = 0\nmax_queued_runs = 0\nheader_timeout = 2.5\nwrite_timeout = 3\n",
    )
    .expect("valid");
    assert_eq!(c.daemon.max_connections, 1, "at least one connection");
    assert_eq!(
        c.daemon.max_queued_runs, 1,
        "a run holds a place until it starts"
    );
    assert_eq!(c.daemon.header_timeout, Duration::from_millis(2500));
    assert_eq!(c.daemon.write_timeout, Duration::from_secs(3));
    let e = parse("[daemon]\nheader_timeout = 0\n").expect_err("zero");
    assert!(e.to_string().contains("header_timeout"), "{e}");
    let e = parse("[daemon]\nwrite_timeout = -1\n").expect_err("negative");
    assert!(e.to_string().contains("write_timeout"), "{e}");
}

#[test]
fn the_per_user_connection_cap_and_the_body_timeout_have_defaults_and_bounds() {
    let d = Config::defaults().daemon;
    assert_eq!(d.max_connections_per_user, 64);
    assert_eq!(d.body_timeout, Duration::from_secs(10));
    let c =
        parse("[daemon]\nmax_connections = 100\nmax_connections_per_user = 8\nbody_timeout = 2\n")
            .expect("valid");
    assert_eq!(c.daemon.max_connections_per_user, 8);
    assert_eq!(c.daemon.body_timeout, Duration::from_secs(2));
    // Above the global cap it would be no cap: clamped to it.
    let c = parse("[daemon]\nmax_connections = 16\n").expect("valid");
    assert_eq!(
        c.daemon.max_connections_per_user, 16,
        "the default 64 is clamped to max_connections"
    );
    let c =
        parse("[daemon]\nmax_connections = 16\nmax_connections_per_user = 100\n").expect("valid");
    assert_eq!(c.daemon.max_connections_per_user, 16);
    let e = parse("[daemon]\nmax_connections_per_user = 0\n").expect_err("zero");
    assert!(e.to_string().contains("max_connections_per_user"), "{e}");
    // A wrong type is refused by the parser, naming the line.
    let e = parse("[daemon]\nmax_connections_per_user = -1\n").expect_err("negative");
    assert!(e.to_string().contains("agentd.toml:2"), "{e}");
    let e = parse("[daemon]\nbody_timeout = 0\n").expect_err("zero");
    assert!(e.to_string().contains("body_timeout"), "{e}");
    let e = parse("[daemon]\nbody_timeout = \"ten\"\n").expect_err("not a number");
    assert!(e.to_string().contains("agentd.toml:2"), "{e}");
    let e = parse("[daemon]\nbody_timeout = -3\n").expect_err("negative");
    assert!(e.to_string().contains("body_timeout"), "{e}");
}

#[test]
fn the_key_can_come_from_a_file_such_as_a_systemd_credential() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = dir.path().join("llm-api-key");
    std::fs::write(&key, "sk-from-file\n").expect("write key");
    let c = parse(&format!("[llm]\napi_key_file = \"{}\"\n", key.display())).expect("valid");
    assert_eq!(
        c.llm.check_api_key("manus").map_err(|e| e.to_string()),
        Ok(())
    );
    assert_eq!(
        c.llm.for_agent("manus").api_key.as_deref(),
        Some("sk-from-file"),
        "the trailing newline is not part of the key"
    );

    // Relative: next to the configuration file outside systemd (under
    // systemd, in $CREDENTIALS_DIRECTORY).
    if std::env::var_os("CREDENTIALS_DIRECTORY").is_none() {
        let file = dir.path().join("agentd.toml");
        std::fs::write(&file, "[llm]\napi_key_file = \"llm-api-key\"\n").expect("write");
        let c = Config::load(Some(&file)).expect("valid");
        assert_eq!(
            c.llm.for_agent("x").api_key.as_deref(),
            Some("sk-from-file")
        );
    }

    // A file that cannot give a key makes the agent unusable, naming it.
    let missing = dir.path().join("no-such-key");
    let c = parse(&format!(
        "[llm]\napi_key_file = \"{}\"\n",
        missing.display()
    ))
    .expect("valid");
    let e = c
        .llm
        .check_api_key("manus")
        .expect_err("unreadable")
        .to_string();
    assert!(
        e.contains("api_key_file") && e.contains("no-such-key"),
        "{e}"
    );
    std::fs::write(&key, "  \n").expect("write key");
    let c = parse(&format!("[llm]\napi_key_file = \"{}\"\n", key.display())).expect("valid");
    assert!(c.llm.check_api_key("manus").is_err(), "an empty key file");
}

#[test]
fn only_one_key_setting_per_table() {
    let e = parse("[llm]\napi_key = \"k\"\napi_key_file = \"/etc/agentd/key\"\n")
        .expect_err("two key settings")
        .to_string();
    assert!(e.contains("api_key, api_key_env and api_key_file"), "{e}");
    // An override's file replaces the base key.
    let c =
        parse("[llm]\napi_key = \"sk-base\"\n[llm.manus]\napi_key_file = \"/nonexistent/key\"\n")
            .expect("valid");
    assert_eq!(c.llm.for_agent("manus").api_key, None);
    assert!(c.llm.check_api_key("manus").is_err());
    assert!(c.llm.check_api_key("toolcall").is_ok());
}

#[test]
fn byte_keys_take_sizes_with_units_like_the_memory_keys() {
    let c = parse(
        "[daemon]\nmax_request_bytes = \"2m\"\nmax_run_bytes = \"128MiB\"\n\
         max_message_bytes = \"1m\"\nmax_tool_arguments_bytes = \"64k\"\n\
         max_tool_result_bytes = \"256k\"\n\n[sandbox]\noutput_limit = \"512k\"\n",
    )
    .expect("valid");
    assert_eq!(c.daemon.max_request_bytes, 2 << 20);
    let l = &c.daemon.run_limits;
    assert_eq!(l.max_run_bytes, 128 << 20);
    assert_eq!(l.max_message_bytes, 1 << 20);
    assert_eq!(l.max_tool_arguments_bytes, 64 << 10);
    assert_eq!(l.max_tool_result_bytes, 256 << 10);
    assert_eq!(c.sandbox.output_limit, 512 << 10);
    // Plain numbers still mean bytes.
    let c = parse("[daemon]\nmax_request_bytes = 65536\n").expect("valid");
    assert_eq!(c.daemon.max_request_bytes, 64 << 10);
    // A size that does not parse names its key and its line.
    let msg = parse("[daemon]\n\nmax_run_bytes = \"lots\"\n")
        .expect_err("not a size")
        .to_string();
    assert!(
        msg.starts_with("/etc/agentd/agentd.toml:3: [daemon] max_run_bytes `lots` is not a size"),
        "{msg}"
    );
    let msg = parse("[sandbox]\noutput_limit = \"1x\"\n")
        .expect_err("not a size")
        .to_string();
    assert!(msg.contains("[sandbox] output_limit `1x`"), "{msg}");
}

#[test]
fn the_per_user_queue_share_has_a_default_and_bounds() {
    let d = Config::defaults().daemon;
    assert_eq!(d.max_queued_runs, 1024);
    assert_eq!(d.max_queued_runs_per_user, 512);
    let c =
        parse("[daemon]\nmax_queued_runs = 100\nmax_queued_runs_per_user = 10\n").expect("valid");
    assert_eq!(c.daemon.max_queued_runs_per_user, 10);
    // Above the queue it is the queue: lowering max_queued_runs alone stays valid.
    let c = parse("[daemon]\nmax_queued_runs = 100\n").expect("valid");
    assert_eq!(c.daemon.max_queued_runs_per_user, 100);
    let e = parse("[daemon]\nmax_queued_runs_per_user = 0\n").expect_err("zero");
    assert!(
        e.to_string().contains("[daemon] max_queued_runs_per_user"),
        "{e}"
    );
}

#[test]
fn plugin_grants_are_parsed_per_plugin() {
    let c = parse(
        "[plugins]\nmemory_limit = \"64m\"\n\n\
         [plugins.http_get]\nallow_hosts = [\"api.github.com\", \"*.example.com:443\"]\n\
         env = { MODE = \"fast\" }\nconfig = { depth = 3, name = \"x\", on = true }\n\
         memory_limit = \"32m\"\ntimeout = 2.5\n",
    )
    .expect("valid");
    let g = c.plugin_grants.of("http_get");
    assert!(g.allow_hosts.allows("api.github.com", 443));
    assert!(g.allow_hosts.allows("a.example.com", 443));
    assert!(!g.allow_hosts.allows("example.com", 443));
    assert_eq!(g.env["MODE"], "fast");
    assert_eq!(g.config["depth"], "3");
    assert_eq!(g.config["on"], "true");
    assert_eq!(g.memory_limit, Some(32 << 20));
    assert_eq!(g.timeout, Some(Duration::from_millis(2500)));
    // A plugin without a table gets nothing.
    let none = c.plugin_grants.of("bash");
    assert!(none.allow_hosts.is_empty() && none.env.is_empty() && none.config.is_empty());
}

#[test]
fn bad_plugin_grants_are_refused_naming_table_and_key() {
    for (text, want) in [
        (
            "[plugins]\nallow_hosts = []\n",
            "unknown key `allow_hosts` in [plugins]",
        ),
        (
            "[plugins.x]\nallow = []\n",
            "[plugins.x] unknown field `allow`",
        ),
        (
            "[plugins.x]\nallow_hosts = [\"https://a.com\"]\n",
            "[plugins.x] allow_hosts",
        ),
        (
            "[plugins.x]\nenv = { \"1A\" = \"v\" }\n",
            "[plugins.x] env and secrets",
        ),
        (
            "[plugins.x]\nmemory_limit = \"1g\"\n",
            "[plugins.x] memory_limit must be between",
        ),
        ("[plugins.x]\ntimeout = 0\n", "[plugins.x] timeout"),
        (
            "[plugins.x]\nconfig = { a = [1] }\n",
            "[plugins.x] config: `a`",
        ),
    ] {
        let e = parse(text).expect_err(text).to_string();
        assert!(e.contains(want), "{text}: {e}");
    }
}

#[test]
fn secrets_are_read_only_when_asked_so_clients_never_touch_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("agentd.toml");
    let text = "[plugins.http_get]\nsecrets = [\"NO_SUCH_SECRET_ANYWHERE\"]\n";
    // A client reading the file (for its socket, say) loads it fine, with
    // no secret value in it.
    let mut c = Config::parse(text, &file).expect("parses without reading secrets");
    assert!(c.plugin_grants.of("http_get").secrets.is_empty());
    // What runs plugins reads them, and a missing one refuses the file.
    let e = c.read_secrets().expect_err("missing secret").to_string();
    assert!(
        e.contains("[plugins.http_get] secrets: NO_SUCH_SECRET_ANYWHERE"),
        "{e}"
    );
}

#[test]
fn mcp_server_keys_have_defaults_and_refuse_typos_and_nonsense() {
    let d = Config::defaults().mcp_server;
    assert!(d.enabled, "served by default: same socket, same peer check");
    assert!(!d.expose_tools, "tool plugins are not offered unless asked");
    assert_eq!(d.idle_timeout, Duration::from_secs(600));
    let c = parse("[mcp_server]\nenabled = false\nexpose_tools = true\nidle_timeout = 1.5\n")
        .expect("valid");
    assert!(!c.mcp_server.enabled);
    assert!(c.mcp_server.expose_tools);
    assert_eq!(c.mcp_server.idle_timeout, Duration::from_millis(1500));
    let msg = parse("[llm]\nmodel = \"m\"\n\n[mcp_server]\nexpose_tool = true\n")
        .expect_err("typo")
        .to_string();
    assert!(msg.starts_with("/etc/agentd/agentd.toml:5"), "{msg}");
    assert!(msg.contains("expose_tool"), "{msg}");
    let msg = parse("[mcp_server]\n\nidle_timeout = 0\n")
        .expect_err("zero")
        .to_string();
    assert!(msg.starts_with("/etc/agentd/agentd.toml:3"), "{msg}");
    assert!(msg.contains("[mcp_server] idle_timeout"), "{msg}");
}

#[test]
fn approvals_and_waits_are_set_per_agent() {
    let c = parse(
        "[daemon]\nrelease_waiting = true\n\n\
         [agents.careful]\napprove = [\"bash\", \"python_execute\"]\ninput_timeout = 90\napproval_timeout = 0.5\n\n\
         [agents.paranoid]\napprove = \"all\"\n\n\
         [agents.trusting]\napprove = []\n",
    )
    .expect("valid");
    assert!(c.daemon.release_waiting);
    let careful = c.agent("careful").expect("agent");
    assert_eq!(
        careful.approve,
        Approve::Tools(vec!["bash".into(), "python_execute".into()])
    );
    assert_eq!(careful.input_timeout, Duration::from_secs(90));
    assert_eq!(careful.approval_timeout, Duration::from_millis(500));
    assert_eq!(c.agent("paranoid").expect("agent").approve, Approve::All);
    assert_eq!(
        c.agent("trusting").expect("agent").approve,
        Approve::Nothing
    );
    let manus = c.agent("manus").expect("agent");
    assert_eq!(
        manus.approve,
        Approve::Nothing,
        "approves nothing by default"
    );
    assert_eq!(manus.input_timeout, Duration::from_secs(3600));
    assert!(!parse("").expect("valid").daemon.release_waiting);
    for (text, words) in [
        (
            "[agents.a]\napprove = \"some\"\n",
            "[agents.a] approve must be a list of tool names or \"all\"",
        ),
        (
            "[agents.a]\ninput_timeout = 0\n",
            "[agents.a] input_timeout",
        ),
        (
            "[agents.a]\napproval_timeout = -1\n",
            "[agents.a] approval_timeout",
        ),
    ] {
        let e = parse(text).expect_err(text).to_string();
        assert!(e.contains(words), "{text}: {e}");
    }
}

#[test]
fn kept_files_are_set_per_agent_and_bad_globs_or_sizes_are_refused() {
    let c = parse(
        "[agents.keeper]\nkeep_files = [\"**/*.py\", \"out/**\"]\nkeep_limit = \"10m\"\n\n\
         [agents.plain]\nkeep_limit = 4096\n",
    )
    .expect("valid");
    let keeper = c.agent("keeper").expect("agent");
    assert_eq!(keeper.keep_files, ["**/*.py", "out/**"]);
    assert_eq!(keeper.keep_limit, 10 << 20);
    let plain = c.agent("plain").expect("agent");
    assert!(plain.keep_files.is_empty(), "keeps nothing by default");
    assert_eq!(plain.keep_limit, 4096);
    assert_eq!(
        c.agent("manus").expect("agent").keep_limit,
        100 << 20,
        "100 MiB by default"
    );
    for (text, words) in [
        (
            "[agents.a]\nkeep_files = [\"a[\"]\n",
            "[agents.a] keep_files pattern `a[`",
        ),
        (
            "[agents.a]\nkeep_limit = \"lots\"\n",
            "[agents.a] keep_limit",
        ),
        ("[agents.a]\nkeep_file = []\n", "keep_file"),
    ] {
        let e = parse(text).expect_err(text).to_string();
        assert!(e.contains(words), "{text}: {e}");
    }
}

#[test]
fn sandbox_engines_are_parsed_with_tls_and_weights() {
    let c = parse(
        "[sandbox]\nimage = \"i\"\n\n[[sandbox.engines]]\nname = \"here\"\n\
         docker_host = \"unix:///var/run/docker.sock\"\nmax_containers = 10\n\n\
         [[sandbox.engines]]\nname = \"far\"\ndocker_host = \"tcp://10.0.0.2:2376\"\n\
         tls_ca = \"/etc/agentd/ca.pem\"\ntls_cert = \"/etc/agentd/cert.pem\"\n\
         tls_key = \"/etc/agentd/key.pem\"\nmax_containers = 40\nweight = 2.5\n",
    )
    .expect("valid");
    let e = &c.sandbox.engines;
    assert_eq!(e.len(), 2);
    assert_eq!(
        (e[0].name.as_str(), e[0].max_containers, e[0].weight),
        ("here", Some(10), 1.0)
    );
    assert_eq!(e[0].tls, None);
    assert_eq!((e[1].max_containers, e[1].weight), (Some(40), 2.5));
    assert_eq!(
        e[1].tls.as_ref().map(|t| t.key.clone()),
        Some(PathBuf::from("/etc/agentd/key.pem"))
    );
    assert_eq!(c.sandbox.engine_list(), c.sandbox.engines);
}

#[test]
fn without_engines_there_is_the_one_local_engine() {
    let c = parse("[sandbox]\ndocker_host = \"unix:///run/d.sock\"\n").expect("valid");
    assert!(c.sandbox.engines.is_empty());
    let list = c.sandbox.engine_list();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].name, "local");
    assert_eq!(list[0].docker_host.as_deref(), Some("unix:///run/d.sock"));
    assert_eq!(
        list[0].max_containers, None,
        "no bound but max_concurrent_runs"
    );
}

#[test]
fn bad_engines_are_refused_at_their_line() {
    let cases = [
        (
            "[[sandbox.engines]]\nname = \"a\"\ndocker_host = \"unix:///x\"\nmax_containers = 1\n\n\
             [[sandbox.engines]]\nname = \"a\"\ndocker_host = \"unix:///y\"\nmax_containers = 1\n",
            6,
            "`a` is used by two engines",
        ),
        (
            "[[sandbox.engines]]\nname = \"a\"\ndocker_host = \"unix:///x\"\nmax_containers = 0\n",
            1,
            "max_containers must be at least 1",
        ),
        (
            "[[sandbox.engines]]\nname = \"a\"\ndocker_host = \"unix:///x\"\n",
            1,
            "max_containers is required",
        ),
        (
            "\n[[sandbox.engines]]\nname = \"a\"\ndocker_host = \"unix:///x\"\nmax_containers = 2\nweight = 0\n",
            2,
            "weight must be a number above 0",
        ),
        (
            "[[sandbox.engines]]\nname = \"t\"\ndocker_host = \"tcp://h:2376\"\nmax_containers = 2\ntls_ca = \"ca.pem\"\n",
            1,
            "tls_cert and tls_key missing",
        ),
        (
            "[[sandbox.engines]]\nname = \"u\"\ndocker_host = \"ssh://u@h\"\nmax_containers = 2\n\
             tls_ca = \"a\"\ntls_cert = \"b\"\ntls_key = \"c\"\n",
            1,
            "tcp:// engines only",
        ),
        (
            "[sandbox]\ndocker_host = \"unix:///x\"\n\n[[sandbox.engines]]\nname = \"a\"\n\
             docker_host = \"unix:///y\"\nmax_containers = 2\n",
            4,
            "[sandbox] docker_host and [[sandbox.engines]] are both set",
        ),
        (
            "[[sandbox.engines]]\nname = \"a\"\ndocker_host = \"unix:///x\"\nmax_containers = 2\nmax_container = 3\n",
            5,
            "unknown field `max_container`",
        ),
    ];
    for (text, line, words) in cases {
        let err = parse(text).expect_err(words).to_string();
        assert!(err.contains(words), "{words}: {err}");
        assert!(
            err.contains(&format!("agentd.toml:{line}")),
            "{words}: names line {line}: {err}"
        );
    }
}

/// The model a run is sent to and the one it is priced at are one answer:
/// the agent's own, else `[llm]`'s, else the default, whose prices apply
/// when nothing names a model.
#[test]
fn the_model_priced_is_the_model_asked() {
    let c = parse(
        "[llm.prices.\"gpt-4o\"]\ninput_price = 2.5\n\n\
         [agents.mini.llm]\nmodel = \"gpt-4o-mini\"\n",
    )
    .expect("parse");
    for agent in ["manus", "mini", "MINI"] {
        assert_eq!(
            c.llm.model_for(agent),
            c.llm.for_agent(agent).model,
            "{agent}"
        );
    }
    assert_eq!(c.llm.model_for("manus"), super::DEFAULT_MODEL);
    assert_eq!(c.llm.model_for("mini"), "gpt-4o-mini");
    assert_eq!(c.llm.price_for("manus").input, Some(2.5));
    assert_eq!(c.llm.price_for("mini").input, None);
}

#[test]
fn each_price_comes_from_the_agent_then_the_model_then_llm() {
    let c = parse(
        "[llm]\nmodel = \"gpt-4o\"\ninput_price = 2.5\noutput_price = 10.0\n\n\
         [llm.prices.\"gpt-4o-mini\"]\ninput_price = 0.15\noutput_price = 0.6\n\n\
         [llm.prices.\"gpt-4o\"]\noutput_price = 8.0\n\n\
         [agents.mini.llm]\nmodel = \"gpt-4o-mini\"\n\n\
         [agents.own.llm]\nmodel = \"gpt-4o-mini\"\ninput_price = 1.0\n\n\
         [agents.other.llm]\nmodel = \"local\"\n",
    )
    .expect("parse");
    let price = |agent: &str| c.llm.price_for(agent);
    // The default model's table sets only output: input is [llm]'s.
    assert_eq!(
        (price("manus").input, price("manus").output),
        (Some(2.5), Some(8.0))
    );
    assert_eq!(
        (price("mini").input, price("mini").output),
        (Some(0.15), Some(0.6))
    );
    assert_eq!(
        (price("own").input, price("own").output),
        (Some(1.0), Some(0.6))
    );
    // A model without a table of its own: [llm]'s prices.
    assert_eq!(
        (price("other").input, price("other").output),
        (Some(2.5), Some(10.0))
    );
    assert!(!parse("[llm]\n")
        .expect("parse")
        .llm
        .price_for("manus")
        .is_set());
}

#[test]
fn bad_prices_and_budgets_are_refused_naming_the_key() {
    for (text, key) in [
        ("[llm]\ninput_price = -1.0\n", "input_price"),
        (
            "[llm.prices.\"m\"]\noutput_price = -0.5\n",
            "[llm.prices.\"m\"] output_price",
        ),
        ("[llm.prices.\"m\"]\ninput_prize = 1.0\n", "input_prize"),
        ("[agents.a.llm]\noutput_price = -2.0\n", "output_price"),
        (
            "[daemon]\ndaily_token_budget = 0\n",
            "[daemon] daily_token_budget",
        ),
        (
            "[agents.a]\ndaily_token_budget = 0\n",
            "[agents.a] daily_token_budget",
        ),
    ] {
        let msg = parse(text).expect_err(text).to_string();
        assert!(msg.contains(key), "{text}: {msg}");
    }
}

#[test]
fn daily_token_budgets_are_read_per_agent_and_for_the_daemon() {
    let c =
        parse("[daemon]\ndaily_token_budget = 5000000\n\n[agents.a]\ndaily_token_budget = 1000\n")
            .expect("parse");
    assert_eq!(c.daemon.daily_token_budget, Some(5_000_000));
    assert_eq!(c.agent("a").and_then(|a| a.daily_token_budget), Some(1000));
    assert_eq!(c.agent("manus").and_then(|a| a.daily_token_budget), None);
}
