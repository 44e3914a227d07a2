//! The run's message memory: a sliding window that never breaks a tool-call
//! group.
//!
//! OpenManus keeps the newest `max_messages` by plain count, which can cut
//! between an assistant `tool_calls` message and its answers; the next request
//! then carries an orphan `tool` message and real servers answer HTTP 400.
//! Here the window is only ever cut at a safe boundary.
//!
//! OpenManus's window also drops the user's request once enough messages
//! follow it: the model forgets its task, and a conversation can be left
//! with no `user` message at all, which Qwen-family chat templates (common
//! behind vLLM and llama.cpp) refuse. agentd pins the request that started
//! the run outside the window, as the system prompt is: the memory is the
//! request, then the newest messages.

use std::sync::Arc;

use super::stuck;
use crate::chat::{Kept, Message, MessageError, Role};

/// The window size an agent gets when it sets none (`max_messages`).
pub const DEFAULT_MAX_MESSAGES: usize = 100;

/// A run's messages: the pinned request, then a window of the newest
/// messages that is only ever cut where no tool-call group is split.
///
/// Each message is kept with its JSON ([`Kept`]) behind an `Arc`, because
/// every step sends the whole memory to the model: [`Memory::shared`] hands
/// the request the messages without copying or encoding them again.
#[derive(Debug, Clone)]
pub struct Memory {
    /// The run's request: never trimmed, always first.
    request: Option<Arc<Kept>>,
    entries: Vec<Entry>,
    max_messages: usize,
    next_serial: u64,
}

/// A message ready to enter memory, with what stuck detection compares:
/// built before the run's lock is taken ([`Entry::new`] parses the
/// message's tool-call arguments once), added under it
/// ([`Memory::add_entry`]).
#[derive(Debug, Clone)]
pub struct Entry {
    /// Its place in the order of adding, which trimming does not change.
    serial: u64,
    message: Arc<Kept>,
    /// Its action's [`stuck::fingerprint`], taken once when it is added
    /// rather than at each later step.
    action: Option<u64>,
}

impl Entry {
    /// The entry of `message`; its place in memory is set when it is added.
    pub fn new(message: Arc<Kept>) -> Self {
        Entry {
            serial: 0,
            action: stuck::fingerprint(&message),
            message,
        }
    }
}

impl Memory {
    /// An empty memory keeping at most `max_messages` (at least 1) besides the
    /// pinned request.
    pub fn new(max_messages: usize) -> Self {
        Memory {
            request: None,
            entries: Vec::new(),
            max_messages: max_messages.max(1),
            next_serial: 0,
        }
    }

    /// Pins the request that started the run outside the window.
    pub fn pin_request(&mut self, request: Message) -> Result<(), MessageError> {
        self.pin_kept(Arc::new(Kept::new(request)))
    }

    /// [`Memory::pin_request`] for a message already encoded and shared.
    pub fn pin_kept(&mut self, request: Arc<Kept>) -> Result<(), MessageError> {
        request.validate()?;
        self.request = Some(request);
        Ok(())
    }

    /// Adds a message at the end and trims the window; refuses (and keeps
    /// nothing) a message that fails [`Message::validate`].
    pub fn add(&mut self, message: Message) -> Result<(), MessageError> {
        self.add_kept(Arc::new(Kept::new(message)))
    }

    /// [`Memory::add`] for a message already encoded, so that a caller
    /// holding a lock around memory encodes before taking it.
    pub fn add_kept(&mut self, message: Arc<Kept>) -> Result<(), MessageError> {
        self.add_entry(Entry::new(message))
    }

    /// [`Memory::add_kept`] for an entry made before taking the run's lock.
    pub fn add_entry(&mut self, mut entry: Entry) -> Result<(), MessageError> {
        entry.message.validate()?;
        entry.serial = self.next_serial;
        self.entries.push(entry);
        self.next_serial += 1;
        self.trim();
        Ok(())
    }

    /// A mark that [`Memory::added_since`] can compare against; it survives
    /// trimming, unlike an index.
    pub fn mark(&self) -> u64 {
        self.next_serial
    }

    /// Messages still in the window that were added after `mark`.
    pub fn added_since(&self, mark: u64) -> impl Iterator<Item = &Message> {
        self.entries_since(mark).map(|(_, m, _)| m)
    }

    /// The window's messages added after `mark`, each with its serial and
    /// its action's fingerprint (for stuck detection).
    pub(super) fn entries_since(
        &self,
        mark: u64,
    ) -> impl Iterator<Item = (u64, &Message, Option<u64>)> {
        self.entries
            .iter()
            .filter(move |e| e.serial >= mark)
            .map(|e| (e.serial, &**e.message, e.action))
    }

    /// What the model is shown: the pinned request, then the window.
    pub fn messages(&self) -> Vec<Message> {
        self.iter().cloned().collect()
    }

    /// Empties the memory into its messages, each moved out when nothing
    /// else shares it (a request still in flight), else copied.
    pub fn take_messages(&mut self) -> Vec<Message> {
        let request = self.request.take();
        let entries = std::mem::take(&mut self.entries);
        request
            .into_iter()
            .chain(entries.into_iter().map(|e| e.message))
            .map(|kept| Arc::try_unwrap(kept).map_or_else(|k| (**k).clone(), Kept::into_message))
            .collect()
    }

    /// The same messages as [`Memory::messages`], shared rather than copied.
    pub fn shared(&self) -> impl Iterator<Item = Arc<Kept>> + '_ {
        self.request
            .iter()
            .chain(self.entries.iter().map(|e| &e.message))
            .cloned()
    }

    /// The pinned request, then the window, oldest first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Message> {
        self.request
            .iter()
            .chain(self.entries.iter().map(|e| &e.message))
            .map(|m| &***m)
    }

    /// Messages held: the pinned request, if any, plus the window.
    pub fn len(&self) -> usize {
        usize::from(self.request.is_some()) + self.entries.len()
    }

    /// Whether the memory holds no message at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn trim(&mut self) {
        if self.entries.len() > self.max_messages {
            let excess = self.entries.len() - self.max_messages;
            self.entries.drain(..excess);
        }
        // A `tool` message at the head has lost the assistant message that
        // called it: drop it (and its siblings) so the window starts clean.
        // An assistant message with calls at the head keeps all its answers,
        // because answers always follow their call and trimming only cuts the
        // front.
        let orphans = self
            .entries
            .iter()
            .take_while(|e| e.message.role == Role::Tool)
            .count();
        self.entries.drain(..orphans);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::{check_tool_pairing, ToolCall};

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "echo".into(),
            arguments: "{}".into(),
        }
    }

    #[test]
    fn keeps_newest_by_count() {
        let mut m = Memory::new(3);
        for i in 0..5 {
            m.add(Message::user(format!("u{i}"))).expect("add");
        }
        let contents: Vec<_> = m.iter().map(|m| m.content_str().to_string()).collect();
        assert_eq!(contents, ["u2", "u3", "u4"]);
    }

    #[test]
    fn never_leaves_an_orphan_tool_message_at_the_head() {
        // Every window size against a conversation of multi-call groups: the
        // window must always be a conversation a real server accepts.
        for max in 1..12 {
            let mut m = Memory::new(max);
            for step in 0..6 {
                m.add(Message::user(format!("step {step}"))).expect("add");
                let ids = [format!("{step}a"), format!("{step}b")];
                m.add(Message::assistant_with_calls(
                    None,
                    ids.iter().map(|i| call(i)).collect(),
                ))
                .expect("add");
                for id in &ids {
                    m.add(Message::tool("r", id.clone(), "echo")).expect("add");
                }
                let window = m.messages();
                assert!(
                    check_tool_pairing(&window).is_ok(),
                    "max={max} step={step}: {window:?}"
                );
                assert!(window.len() <= max);
            }
        }
    }

    #[test]
    fn the_request_is_pinned_outside_the_window() {
        for max in 1..8 {
            let mut m = Memory::new(max);
            m.pin_request(Message::user("the task")).expect("pin");
            for step in 0..6 {
                let ids = [format!("{step}a"), format!("{step}b")];
                m.add(Message::assistant_with_calls(
                    None,
                    ids.iter().map(|i| call(i)).collect(),
                ))
                .expect("add");
                for id in &ids {
                    m.add(Message::tool("r", id.clone(), "echo")).expect("add");
                }
                let window = m.messages();
                assert_eq!(window[0], Message::user("the task"), "max={max}");
                assert!(check_tool_pairing(&window).is_ok(), "max={max}: {window:?}");
                assert!(window.len() <= max + 1);
            }
        }
    }

    #[test]
    fn rejects_invalid_messages() {
        let mut m = Memory::new(10);
        let mut bad = Message::tool("x", "id", "n");
        bad.tool_call_id = None;
        assert!(m.add(bad).is_err());
        assert!(m.is_empty());
    }

    #[test]
    fn marks_survive_trimming() {
        let mut m = Memory::new(2);
        m.add(Message::user("a")).expect("add");
        let mark = m.mark();
        m.add(Message::user("b")).expect("add");
        m.add(Message::user("c")).expect("add");
        let since: Vec<_> = m.added_since(mark).map(|m| m.content_str()).collect();
        assert_eq!(since, ["b", "c"]);
    }

    #[test]
    fn taking_the_messages_empties_the_memory_and_copies_only_what_is_shared() {
        let mut m = Memory::new(2);
        m.pin_request(Message::user("task")).expect("pin");
        for text in ["a", "b", "c"] {
            m.add(Message::user(text)).expect("add");
        }
        // A request still in flight shares the newest message.
        let in_flight: Vec<Arc<Kept>> = m.shared().collect();
        let taken = m.take_messages();
        let texts: Vec<_> = taken.iter().map(Message::content_str).collect();
        assert_eq!(texts, ["task", "b", "c"], "the request, then the window");
        assert!(m.is_empty() && m.messages().is_empty());
        assert_eq!(in_flight[2].content_str(), "c", "the shared copy is intact");
        // Nothing shares them now: moved out, not copied.
        let mut m = Memory::new(2);
        m.add(Message::user("x")).expect("add");
        let before = m.shared().next().map(|k| k.content_str().as_ptr());
        let taken = m.take_messages();
        assert_eq!(Some(taken[0].content_str().as_ptr()), before);
    }
}
