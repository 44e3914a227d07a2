//! How the run context applies [`RunLimits`](super::settings::RunLimits):
//! cutting text with a note the model and the operator can read, and
//! counting the bytes a message or an event makes the daemon keep. Kept
//! apart from the context so the rules can be tested without a run.

use super::events::RunEvent;
use crate::chat::Message;

/// Room kept for the note, so that a cut text with its note stays within
/// its limit.
const NOTE_ROOM: usize = 256;

/// Fixed cost counted per message or event besides its text: the record's
/// fields, its JSON punctuation, its history row. A flood of empty items
/// still spends the budget.
const ITEM_OVERHEAD: u64 = 64;

/// `1048576` → `1 MiB`, for notes and errors people read.
pub fn human_bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 30 && n % (1 << 30) == 0 => format!("{} GiB", n >> 30),
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} bytes"),
    }
}

/// Cuts `text` so that, with the note appended, it is at most `limit` bytes
/// (on a character boundary); `what` and `key` name the data and the
/// setting in the note. Returns how many bytes were cut (0: unchanged).
pub fn truncate_with_note(text: &mut String, limit: usize, what: &str, key: &str) -> usize {
    if text.len() <= limit {
        return 0;
    }
    let mut keep = limit.saturating_sub(NOTE_ROOM);
    while !text.is_char_boundary(keep) {
        keep -= 1;
    }
    let cut = text.len() - keep;
    text.truncate(keep);
    text.shrink_to_fit();
    text.push_str(&format!(
        "\n[... truncated {cut} bytes: {what} over {} ({key}) ...]",
        human_bytes(limit as u64)
    ));
    cut
}

/// The bytes a message makes the daemon keep (transcript, history).
pub fn message_bytes(m: &Message) -> u64 {
    let text = m.content.as_ref().map_or(0, String::len)
        + m.tool_call_id.as_ref().map_or(0, String::len)
        + m.name.as_ref().map_or(0, String::len)
        + m.tool_calls
            .iter()
            .map(|c| c.id.len() + c.name.len() + c.arguments.len() + 16)
            .sum::<usize>();
    text as u64 + ITEM_OVERHEAD
}

/// The bytes an event makes the daemon keep (its event log, its history
/// rows, what each follower is sent).
pub fn event_bytes(e: &RunEvent) -> u64 {
    let text = match e {
        RunEvent::RunStarted {
            run_id,
            agent,
            request,
            strategy,
            strategy_version,
            ..
        } => run_id.len() + agent.len() + request.len() + strategy.len() + strategy_version.len(),
        RunEvent::AssistantMessage {
            content,
            tool_calls,
            ..
        } => {
            content.as_ref().map_or(0, String::len)
                + tool_calls.iter().map(|n| n.len() + 3).sum::<usize>()
        }
        RunEvent::ToolCall {
            id,
            name,
            arguments,
            ..
        } => id.len() + name.len() + arguments.len(),
        RunEvent::ToolResult {
            id, name, output, ..
        } => id.len() + name.len() + output.len(),
        RunEvent::StepFinished { result, .. } => result.len(),
        RunEvent::RunEnded { error, .. } => error.as_ref().map_or(0, String::len),
        RunEvent::InputRequested {
            id,
            plugin,
            question,
            ..
        } => id.len() + plugin.len() + question.len(),
        RunEvent::InputReceived { id, text, .. } => id.len() + text.as_ref().map_or(0, String::len),
        RunEvent::ApprovalRequested {
            call_id,
            tool,
            arguments,
            ..
        } => call_id.len() + tool.len() + arguments.len(),
        RunEvent::ApprovalDecided {
            call_id,
            tool,
            reason,
            ..
        } => call_id.len() + tool.len() + reason.as_ref().map_or(0, String::len),
        // Each step's JSON keys and status word cost about 48 bytes.
        RunEvent::PlanChanged { plan, .. } => plan.text_bytes() + plan.steps.len() * 48,
        RunEvent::StepStarted { .. } | RunEvent::StuckDetected { .. } => 0,
    };
    text as u64 + ITEM_OVERHEAD
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_text_with_its_note_fits_its_limit() {
        let mut text = "é".repeat(100_000);
        let cut = truncate_with_note(&mut text, 64 << 10, "tool result", "max_tool_result_bytes");
        assert!(text.len() <= 64 << 10, "{}", text.len());
        let kept = text.find("\n[... truncated").expect("the note");
        assert_eq!(cut + kept, 200_000, "what is kept and what is cut add up");
        assert!(
            text[..kept].chars().all(|c| c == 'é'),
            "cut on a char boundary"
        );
        assert!(
            text.ends_with(&format!(
                "[... truncated {cut} bytes: tool result over 64 KiB (max_tool_result_bytes) ...]"
            )),
            "{}",
            &text[text.len() - 120..]
        );
    }

    #[test]
    fn a_short_text_is_left_alone() {
        let mut text = "short".to_string();
        assert_eq!(truncate_with_note(&mut text, 1024, "x", "k"), 0);
        assert_eq!(text, "short");
    }

    #[test]
    fn sizes_count_every_text_field() {
        let m = Message::assistant_with_calls(
            Some("abc".into()),
            vec![crate::chat::ToolCall {
                id: "i".into(),
                name: "n".into(),
                arguments: "x".repeat(1000),
            }],
        );
        assert!(message_bytes(&m) >= 1003);
        let e = RunEvent::ToolResult {
            step: 1,
            id: "i".into(),
            name: "n".into(),
            ok: true,
            output: "y".repeat(5000),
        };
        assert!(event_bytes(&e) >= 5000);
        assert_eq!(human_bytes(64 << 20), "64 MiB");
        assert_eq!(human_bytes(1000), "1000 bytes");
    }
}
