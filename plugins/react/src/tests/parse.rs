//! The parser on replies written the way small local models (Llama 3.x
//! 1B-8B, Qwen 2.5, Phi-3, Mistral 7B, Gemma 2, DeepSeek-R1 distills)
//! answer a ReAct prompt: the canonical format, and each way they depart
//! from it.

use serde_json::{Value, json};

use crate::parse::{Reply, kept, parse};

/// The action `text` asks for: tool, input, extra actions.
#[track_caller]
fn action(text: &str) -> (String, Value, usize) {
    match parse(text) {
        Reply::Action {
            tool,
            input,
            extra_actions,
            ..
        } => (tool, input, extra_actions),
        other => panic!("expected an action from {text:?}, got {other:?}"),
    }
}

#[track_caller]
fn thought(text: &str) -> Option<String> {
    match parse(text) {
        Reply::Action { thought, .. } | Reply::Final { thought, .. } => thought,
        other => panic!("expected an action or answer from {text:?}, got {other:?}"),
    }
}

#[track_caller]
fn answer(text: &str) -> String {
    match parse(text) {
        Reply::Final { answer, .. } => answer,
        other => panic!("expected a final answer from {text:?}, got {other:?}"),
    }
}

/// Why `text` cannot be read.
#[track_caller]
fn refused(text: &str) -> String {
    match parse(text) {
        Reply::Unparsed { why } => why,
        other => panic!("expected {text:?} to be refused, got {other:?}"),
    }
}

fn one(tool: &str, input: Value) -> (String, Value, usize) {
    (tool.to_string(), input, 0)
}

// The canonical format and its layout variants.

#[test]
fn canonical_thought_action_input() {
    let text = "Thought: I need to see which files are in the working directory.\nAction: bash\nAction Input: {\"command\": \"ls -la\"}";
    assert_eq!(action(text), one("bash", json!({"command": "ls -la"})));
    assert_eq!(
        thought(text).as_deref(),
        Some("I need to see which files are in the working directory.")
    );
}

#[test]
fn no_thought() {
    let text = "Action: python_execute\nAction Input: {\"code\": \"print(2**10)\"}";
    assert_eq!(
        action(text),
        one("python_execute", json!({"code": "print(2**10)"}))
    );
    assert_eq!(thought(text), None);
}

#[test]
fn crlf_line_endings() {
    let text = "Thought: list files\r\nAction: bash\r\nAction Input: {\"command\": \"ls\"}\r\n";
    assert_eq!(action(text), one("bash", json!({"command": "ls"})));
}

#[test]
fn fenced_json_input() {
    let text = "Thought: Let me write the file.\nAction: str_replace_editor\nAction Input:\n```json\n{\n  \"command\": \"create\",\n  \"path\": \"/workspace/hello.py\",\n  \"file_text\": \"print('hello')\\n\"\n}\n```";
    assert_eq!(
        action(text),
        one(
            "str_replace_editor",
            json!({"command": "create", "path": "/workspace/hello.py", "file_text": "print('hello')\n"})
        )
    );
}

#[test]
fn fence_on_the_input_line() {
    let text = "Action: bash\nAction Input: ```json {\"command\": \"pwd\"} ```";
    assert_eq!(action(text), one("bash", json!({"command": "pwd"})));
}

#[test]
fn input_on_the_line_after_its_label() {
    let text = "Thought: check python version\nAction: bash\nAction Input:\n{\"command\": \"python3 --version\"}";
    assert_eq!(
        action(text),
        one("bash", json!({"command": "python3 --version"}))
    );
}

#[test]
fn input_on_the_line_after_the_action_without_a_label() {
    let text = "Thought: I'll echo it.\nAction: echo\n{\"text\": \"hi\"}";
    assert_eq!(action(text), one("echo", json!({"text": "hi"})));
}

#[test]
fn tool_name_on_the_line_after_action() {
    let text = "Thought: run it\nAction:\nbash\nAction Input: {\"command\": \"date\"}";
    assert_eq!(action(text), one("bash", json!({"command": "date"})));
}

#[test]
fn prose_before_the_format() {
    let text = "Sure! I can help with that. First, I'll look at the directory.\n\nThought: I should list the files.\nAction: bash\nAction Input: {\"command\": \"ls\"}";
    assert_eq!(action(text), one("bash", json!({"command": "ls"})));
    assert_eq!(thought(text).as_deref(), Some("I should list the files."));
}

#[test]
fn prose_before_without_a_thought_label_is_the_thought() {
    let text = "I will count the lines in the file.\nAction: bash\nAction Input: {\"command\": \"wc -l notes.txt\"}";
    assert_eq!(
        thought(text).as_deref(),
        Some("I will count the lines in the file.")
    );
}

#[test]
fn prose_after_the_input() {
    let text = "Thought: I need the date.\nAction: bash\nAction Input: {\"command\": \"date\"}\n\nI will wait for the result of this command before continuing.";
    assert_eq!(action(text), one("bash", json!({"command": "date"})));
}

#[test]
fn prose_after_the_input_on_the_same_line() {
    let text = "Action: echo\nAction Input: {\"text\": \"ping\"} (this just echoes the text back)";
    assert_eq!(action(text), one("echo", json!({"text": "ping"})));
}

#[test]
fn bold_markdown_labels() {
    let text = "**Thought:** I need to run the script.\n**Action:** python_execute\n**Action Input:** {\"code\": \"print(1+1)\"}";
    assert_eq!(
        action(text),
        one("python_execute", json!({"code": "print(1+1)"}))
    );
    assert_eq!(thought(text).as_deref(), Some("I need to run the script."));
}

#[test]
fn bold_label_with_the_colon_outside() {
    let text = "**Action**: bash\n**Action Input**: {\"command\": \"uname -a\"}";
    assert_eq!(action(text), one("bash", json!({"command": "uname -a"})));
}

#[test]
fn numbered_labels_as_in_the_react_paper() {
    let text =
        "Thought 1: I need to search for the answer.\nAction 1: search[capital of Australia]";
    assert_eq!(action(text), one("search", json!("capital of Australia")));
}

#[test]
fn lower_and_upper_case_labels() {
    let text = "thought: list them\naction: bash\naction input: {\"command\": \"ls /\"}";
    assert_eq!(action(text), one("bash", json!({"command": "ls /"})));
    let text = "THOUGHT: list them\nACTION: bash\nACTION_INPUT: {\"command\": \"ls /\"}";
    assert_eq!(action(text), one("bash", json!({"command": "ls /"})));
}

// The tool's name as models write it: the step matches it to a tool.

#[test]
fn tool_name_in_backticks_or_other_case_is_kept_for_the_step() {
    let (tool, ..) = action("Action: `Bash`\nAction Input: {\"command\": \"ls\"}");
    assert_eq!(tool, "Bash");
    let (tool, ..) = action("Action: PYTHON_EXECUTE\nAction Input: {\"code\": \"1\"}");
    assert_eq!(tool, "PYTHON_EXECUTE");
}

#[test]
fn inline_call_with_json() {
    let text = "Thought: echo it\nAction: echo({\"text\": \"hello world\"})";
    assert_eq!(action(text), one("echo", json!({"text": "hello world"})));
}

#[test]
fn inline_python_call_with_keyword_arguments() {
    let text = "Action: python_execute(code=\"print(sum(range(10)))\")";
    assert_eq!(
        action(text),
        one("python_execute", json!({"code": "print(sum(range(10)))"}))
    );
}

#[test]
fn inline_json_after_the_name() {
    let text = "Action: bash {\"command\": \"whoami\"}";
    assert_eq!(action(text), one("bash", json!({"command": "whoami"})));
}

#[test]
fn empty_parentheses_then_the_input() {
    let text = "Action: terminate()\nAction Input: {\"status\": \"success\"}";
    assert_eq!(action(text), one("terminate", json!({"status": "success"})));
}

// JSON as small models write it.

#[test]
fn single_quoted_json() {
    let text = "Thought: greet\nAction: echo\nAction Input: {'text': 'hello'}";
    assert_eq!(action(text), one("echo", json!({"text": "hello"})));
}

#[test]
fn trailing_comma() {
    let text = "Action: str_replace_editor\nAction Input: {\n  \"command\": \"view\",\n  \"path\": \"/workspace\",\n}";
    assert_eq!(
        action(text),
        one(
            "str_replace_editor",
            json!({"command": "view", "path": "/workspace"})
        )
    );
}

#[test]
fn unquoted_keys() {
    let text = "Action: bash\nAction Input: {command: \"cat /etc/os-release\"}";
    assert_eq!(
        action(text),
        one("bash", json!({"command": "cat /etc/os-release"}))
    );
}

#[test]
fn python_literals() {
    let text = "Action: bash\nAction Input: {'command': 'ls', 'restart': True}";
    assert_eq!(
        action(text),
        one("bash", json!({"command": "ls", "restart": true}))
    );
    let text = "Action: search\nAction Input: {\"query\": \"rust\", \"limit\": None}";
    assert_eq!(
        action(text),
        one("search", json!({"query": "rust", "limit": null}))
    );
}

#[test]
fn code_with_raw_newlines_inside_the_string() {
    let text = "Thought: I'll write a loop.\nAction: python_execute\nAction Input: {\"code\": \"for i in range(3):\n    print(i)\"}";
    assert_eq!(
        action(text),
        one(
            "python_execute",
            json!({"code": "for i in range(3):\n    print(i)"})
        )
    );
}

#[test]
fn labels_inside_a_multi_line_string_belong_to_the_input() {
    // Code with raw newlines, whose lines would read as labels.
    let code = "import sys\n# Action: read the file\nprint('done')\nObservation: not a label";
    let text =
        format!("Thought: run it\nAction: python_execute\nAction Input: {{\"code\": \"{code}\"}}");
    assert_eq!(action(&text), one("python_execute", json!({"code": code})));
    assert_eq!(kept(&text), text, "nothing in the string is cut");
}

#[test]
fn an_apostrophe_in_prose_does_not_hide_labels() {
    let text = "Thought: I can't see the files, so I'll list them {quickly}.\nAction: bash\nAction Input: {\"command\": \"ls\"}";
    assert_eq!(action(text), one("bash", json!({"command": "ls"})));
}

#[test]
fn a_bare_string_input_is_left_for_the_step() {
    let text = "Thought: list the files\nAction: bash\nAction Input: ls -la /workspace";
    assert_eq!(action(text), one("bash", json!("ls -la /workspace")));
}

#[test]
fn a_fenced_code_input() {
    let text = "Action: python_execute\nAction Input:\n```python\nimport math\nprint(math.pi)\n```";
    assert_eq!(
        action(text),
        one("python_execute", json!("import math\nprint(math.pi)"))
    );
}

#[test]
fn no_input_at_all_is_an_empty_object() {
    assert_eq!(
        action("Thought: done.\nAction: terminate"),
        one("terminate", json!({}))
    );
}

#[test]
fn unbalanced_json_is_refused_as_not_closed() {
    let why = refused("Action: bash\nAction Input: {\"command\": \"ls -la\"");
    assert!(why.contains("not closed"), "{why}");
    assert!(why.contains("`bash`"), "{why}");
}

#[test]
fn unquoted_text_values_are_refused() {
    let why = refused("Action: bash\nAction Input: {command: ls -la}");
    assert!(why.contains("`ls` is not a JSON value"), "{why}");
}

#[test]
fn an_unescaped_quote_inside_a_string_is_refused() {
    let why = refused("Action: echo\nAction Input: {\"text\": \"He said \"hi\" twice\"}");
    assert!(why.contains("not valid JSON"), "{why}");
}

#[test]
fn a_missing_comma_is_refused() {
    let why = refused("Action: echo\nAction Input: {\"text\": \"a\"\n\"extra\": 1}");
    assert!(why.contains("not valid JSON"), "{why}");
}

// Final answers.

#[test]
fn final_answer_alone() {
    assert_eq!(
        answer("Final Answer: The capital of France is Paris."),
        "The capital of France is Paris."
    );
}

#[test]
fn final_answer_after_a_thought() {
    let text = "Thought: I now know the final answer.\nFinal Answer: 1024";
    assert_eq!(answer(text), "1024");
    assert_eq!(
        thought(text).as_deref(),
        Some("I now know the final answer.")
    );
}

#[test]
fn final_answer_in_lower_case_and_bold() {
    assert_eq!(answer("final answer: 42"), "42");
    assert_eq!(
        answer("**Final Answer:** The file has 12 lines."),
        "The file has 12 lines."
    );
}

#[test]
fn a_multi_line_final_answer_is_kept_whole() {
    let text = "Thought: I have everything.\nFinal Answer: The files are:\n- a.txt\n- b.txt\n\nBoth are empty.";
    assert_eq!(
        answer(text),
        "The files are:\n- a.txt\n- b.txt\n\nBoth are empty."
    );
}

#[test]
fn an_answer_that_mentions_action_later_stays_an_answer() {
    let text = "Final Answer: Done. Next time you could take this action:\nAction: rerun the script with --verbose";
    assert_eq!(
        answer(text),
        "Done. Next time you could take this action:\nAction: rerun the script with --verbose"
    );
}

#[test]
fn action_named_final_answer_is_an_answer() {
    let text = "Thought: I know it.\nAction: Final Answer\nAction Input: \"Paris\"";
    assert_eq!(answer(text), "Paris");
}

#[test]
fn an_empty_final_answer_is_refused() {
    let why = refused("Thought: I am done.\nFinal Answer:");
    assert!(why.contains("followed by nothing"), "{why}");
}

// JSON calls in place of the lines.

#[test]
fn langchain_json_blob_after_action() {
    let text = "Thought: I need to list files.\nAction:\n```\n{\n  \"action\": \"bash\",\n  \"action_input\": {\"command\": \"ls\"}\n}\n```";
    assert_eq!(action(text), one("bash", json!({"command": "ls"})));
}

#[test]
fn langchain_json_blob_without_labels() {
    let text = "I'll check the disk usage.\n```json\n{\"action\": \"bash\", \"action_input\": {\"command\": \"df -h\"}}\n```";
    assert_eq!(action(text), one("bash", json!({"command": "df -h"})));
    assert_eq!(thought(text).as_deref(), Some("I'll check the disk usage."));
}

#[test]
fn langchain_final_answer_blob() {
    let text = "```json\n{\"action\": \"Final Answer\", \"action_input\": \"The sum is 45.\"}\n```";
    assert_eq!(answer(text), "The sum is 45.");
}

#[test]
fn a_tool_call_written_as_json_by_a_tool_calling_model() {
    // Llama 3.x without the tools parameter writes its call as text.
    let text = "{\"name\": \"python_execute\", \"parameters\": {\"code\": \"print('hi')\"}}";
    assert_eq!(
        action(text),
        one("python_execute", json!({"code": "print('hi')"}))
    );
}

#[test]
fn a_hermes_tool_call_tag() {
    let text =
        "<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>";
    assert_eq!(action(text), one("bash", json!({"command": "ls"})));
}

#[test]
fn openai_shaped_call_with_arguments_as_a_string() {
    let text = "{\"type\": \"function\", \"function\": {\"name\": \"echo\", \"arguments\": \"{\\\"text\\\": \\\"x\\\"}\"}}";
    // The string is left for the step, which reads an object in it.
    assert_eq!(action(text), one("echo", json!("{\"text\": \"x\"}")));
}

#[test]
fn a_broken_json_call_says_so() {
    let why =
        refused("```json\n{\"action\": \"bash\", \"action_input\": {\"command\": \"ls\"}\n```");
    assert!(why.contains("not closed"), "{why}");
}

// Several actions, invented observations, thinking.

#[test]
fn two_actions_in_one_reply_run_the_first_and_count_the_rest() {
    let text = "Thought: I'll do both.\nAction: echo\nAction Input: {\"text\": \"one\"}\nAction: echo\nAction Input: {\"text\": \"two\"}";
    assert_eq!(
        action(text),
        ("echo".to_string(), json!({"text": "one"}), 1)
    );
}

#[test]
fn an_invented_observation_ends_the_action_and_is_cut() {
    let text = "Thought: list files\nAction: bash\nAction Input: {\"command\": \"ls\"}\nObservation: a.txt b.txt\nThought: I now know the answer.\nFinal Answer: There are two files.";
    assert_eq!(action(text), one("bash", json!({"command": "ls"})));
    assert_eq!(
        kept(text),
        "Thought: list files\nAction: bash\nAction Input: {\"command\": \"ls\"}"
    );
    // After the cut the reply is the same action, and nothing of the
    // invented steps is counted as further actions.
    assert_eq!(action(kept(text)), one("bash", json!({"command": "ls"})));
}

#[test]
fn an_invented_observation_before_an_unclosed_think_is_cut_where_it_stands() {
    // The reply is what comes before the unclosed `<think>`; the cut is at
    // the invented observation, found in that part, not shifted by the
    // thinking's length (which could land inside a multi-byte character).
    let text =
        "Action: bash\nAction Input: {\"command\": \"ls\"}\nObservation: ééééé\n<think>abcdefg";
    assert_eq!(
        kept(text),
        "Action: bash\nAction Input: {\"command\": \"ls\"}"
    );
    let text = "Action: bash\nObservation: ééééé\n<think>abcdefg";
    assert_eq!(kept(text), "Action: bash");
}

#[test]
fn actions_after_an_invented_observation_are_not_counted() {
    let text = "Action: echo\nAction Input: {\"text\": \"a\"}\nObservation: a\nAction: echo\nAction Input: {\"text\": \"b\"}";
    assert_eq!(action(text), one("echo", json!({"text": "a"})));
}

#[test]
fn a_reply_without_an_observation_is_kept_whole() {
    let text = "Thought: x\nFinal Answer: Observation: is a word in my answer";
    assert_eq!(kept(text), text);
    assert_eq!(answer(text), "Observation: is a word in my answer");
}

#[test]
fn thinking_tags_are_skipped() {
    let text = "<think>\nThe user wants the date. Action: maybe bash? Final Answer: not yet.\n</think>\n\nThought: I'll ask the shell.\nAction: bash\nAction Input: {\"command\": \"date\"}";
    assert_eq!(action(text), one("bash", json!({"command": "date"})));
}

#[test]
fn only_thinking_is_refused() {
    let why = refused("<think>\nLet me think about how to list the files. I could use ls.");
    assert!(why.contains("only thinking"), "{why}");
}

// What cannot be read at all.

#[test]
fn an_empty_reply_is_refused() {
    assert_eq!(refused(""), "it was empty");
    assert_eq!(refused("  \n\n "), "it was empty");
}

#[test]
fn plain_prose_is_refused() {
    let why = refused("The capital of France is Paris. Let me know if you need anything else!");
    assert!(
        why.contains("neither an `Action:` line nor a `Final Answer:` line"),
        "{why}"
    );
}

#[test]
fn a_thought_alone_is_refused() {
    let why = refused("Thought: I should look at the files first.");
    assert!(why.contains("a `Thought:` but neither"), "{why}");
}

#[test]
fn an_input_without_an_action_is_refused() {
    let why = refused("Thought: run ls\nAction Input: {\"command\": \"ls\"}");
    assert!(why.contains("no `Action:` line"), "{why}");
}

#[test]
fn an_action_without_a_tool_name_is_refused() {
    let why = refused("Thought: hmm\nAction:\nAction Input: {\"command\": \"ls\"}");
    assert!(why.contains("not followed by a tool name"), "{why}");
}

#[test]
fn braces_in_prose_are_not_a_call() {
    let why = refused("The set {1, 2, 3} has three elements.");
    assert!(why.contains("neither"), "{why}");
}

/// Model output is arbitrary text: the parser must answer for any of it
/// without panicking (a trap would end the run). Replies stitched from the
/// pieces the parser cares about, multi-byte characters among them, by a
/// fixed pseudo-random sequence.
#[test]
fn no_reply_makes_the_parser_panic() {
    const PIECES: &[&str] = &[
        "Thought:",
        "Action:",
        "Action Input:",
        "Final Answer:",
        "Observation:",
        "**",
        "\n",
        "\r\n",
        " ",
        "{",
        "}",
        "[",
        "]",
        "(",
        ")",
        "\"",
        "'",
        "\\",
        ",",
        ":",
        "=",
        "`",
        "```json",
        "```",
        "<think>",
        "</think>",
        "<tool_call>",
        "True",
        "None",
        "bash",
        "é",
        "日本",
        "🦀",
        "functions.",
        "action",
        "name",
        "arguments",
        "1e5",
        "-",
        "//",
        "/*",
        "*/",
        "\t",
    ];
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut answered = 0;
    for _ in 0..5000 {
        let len = (next() % 24) as usize;
        let text: String = (0..len)
            .map(|_| PIECES[(next() % PIECES.len() as u64) as usize])
            .collect();
        let reply = parse(&text);
        let _ = kept(&text);
        let _ = crate::json_repair::parse_input(&text);
        if !matches!(reply, Reply::Unparsed { .. }) {
            answered += 1;
        }
    }
    assert!(
        answered > 0,
        "some stitched replies read as actions or answers"
    );
}
