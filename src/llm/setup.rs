//! What to tell a user whose LLM endpoint is missing.
//!
//! The first thing a new user meets is usually an endpoint that is not set
//! or not running. Retrying cannot fix either, so such a run fails at once,
//! and the message is the fix: the lines to add for the three servers
//! agentd is most often pointed at.

/// The `[llm]` lines for OpenAI, Ollama and a llama.cpp server, indented
/// for an error message.
pub const ENDPOINT_EXAMPLES: &str = concat!(
    "  # OpenAI (and set $OPENAI_API_KEY, or api_key_file)\n",
    "  [llm]\n",
    "  base_url = \"https://api.openai.com/v1\"\n",
    "  model = \"gpt-4o\"\n",
    "  # Ollama (`ollama serve`, then `ollama pull qwen2.5:7b`)\n",
    "  [llm]\n",
    "  base_url = \"http://127.0.0.1:11434/v1\"\n",
    "  model = \"qwen2.5:7b\"\n",
    "  # a llama.cpp server (`llama-server -m MODEL.gguf --jinja --port 8080`)\n",
    "  [llm]\n",
    "  base_url = \"http://127.0.0.1:8080/v1\"\n",
    "  model = \"default\"",
);

/// Neither `[llm] base_url`, `$OPENAI_BASE_URL` nor an API key: there is
/// nothing to send a request to (agentd no longer guesses OpenAI when it
/// has no key for it either).
pub fn no_endpoint_help() -> String {
    format!(
        "no endpoint is set; add one of these to agentd.toml \
         (`agentd doctor` shows which file), or set $OPENAI_BASE_URL (and \
         $OPENAI_API_KEY) where agentd runs:\n{ENDPOINT_EXAMPLES}"
    )
}

/// An endpoint that has never answered refuses connections or does not
/// resolve: a server that is not running or a wrong address.
pub fn unreachable_help(base_url: &str) -> String {
    format!(
        "is the server running? agentd is configured for {base_url} ([llm] base_url or \
         $OPENAI_BASE_URL); start the server there, or point agentd at another, e.g.:\n\
         {ENDPOINT_EXAMPLES}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_example_line_is_indented_and_the_three_servers_are_there() {
        assert!(ENDPOINT_EXAMPLES.lines().all(|l| l.starts_with("  ")));
        assert_eq!(ENDPOINT_EXAMPLES.matches("[llm]").count(), 3);
        let help = no_endpoint_help();
        assert!(help.ends_with(ENDPOINT_EXAMPLES));
        assert!(unreachable_help("http://127.0.0.1:9/v1").contains("http://127.0.0.1:9/v1"));
    }
}
