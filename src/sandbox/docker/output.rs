//! Bounded buffers for command output.
//!
//! A command may print gigabytes; the daemon must not. Each stream keeps at
//! most `limit` bytes and counts the rest, so the model is told how much it
//! did not see.

/// Keeps the first `limit` bytes of a stream and counts everything.
#[derive(Debug)]
pub(crate) struct CappedOutput {
    buf: Vec<u8>,
    limit: usize,
    total: u64,
}

impl CappedOutput {
    pub(crate) fn new(limit: usize) -> Self {
        CappedOutput {
            buf: Vec::new(),
            limit,
            total: 0,
        }
    }

    pub(crate) fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let room = self.limit.saturating_sub(self.buf.len());
        self.buf.extend_from_slice(&bytes[..room.min(bytes.len())]);
    }

    /// Every byte pushed, kept or not.
    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    /// The kept bytes as text (invalid UTF-8 replaced), and whether some
    /// were dropped; a dropped tail is announced by a note at the end.
    pub(crate) fn into_text(self) -> (String, bool) {
        let over = self.total.saturating_sub(self.limit as u64);
        let mut bytes = self.buf;
        if over > 0 {
            // Do not let the cut split a character into a replacement sign.
            if let Err(e) = std::str::from_utf8(&bytes) {
                if e.error_len().is_none() {
                    bytes.truncate(e.valid_up_to());
                }
            }
        }
        let mut text = String::from_utf8_lossy(&bytes).into_owned();
        if over > 0 {
            text.push_str(&format!(
                "\n[output truncated: {over} bytes over the {}-byte limit]",
                self.limit
            ));
        }
        (text, over > 0)
    }
}

/// Collects one stream of a shell command up to its end marker.
///
/// The marker is `\n<needle><tail>\n` where the needle carries a fresh
/// random nonce, so output cannot forge it; `accept` checks the tail (the
/// exit code on stdout, nothing on stderr). Bytes that could still be the
/// start of the marker are held back; everything else goes to the capped
/// output at once, so memory stays bounded whatever the command prints.
#[derive(Debug)]
pub(crate) struct MarkerScanner {
    needle: Vec<u8>,
    hold: Vec<u8>,
    out: CappedOutput,
    tail: Option<String>,
    accept: fn(&str) -> bool,
}

/// Longest marker tail accepted (an exit code); longer means not a marker.
const MAX_TAIL: usize = 32;

impl MarkerScanner {
    /// `needle` must start with `\n`.
    pub(crate) fn new(needle: String, limit: usize, accept: fn(&str) -> bool) -> Self {
        debug_assert!(needle.starts_with('\n'));
        MarkerScanner {
            needle: needle.into_bytes(),
            hold: Vec::new(),
            out: CappedOutput::new(limit),
            tail: None,
            accept,
        }
    }

    /// The marker's tail once it has been seen.
    pub(crate) fn tail(&self) -> Option<&str> {
        self.tail.as_deref()
    }

    /// Bytes received so far (kept, dropped or held back).
    pub(crate) fn seen(&self) -> u64 {
        self.out.total() + self.hold.len() as u64
    }

    pub(crate) fn push(&mut self, chunk: &[u8]) {
        if self.tail.is_some() {
            // Late output of a background job: not this command's.
            return;
        }
        self.hold.extend_from_slice(chunk);
        let mut from = 0;
        loop {
            let Some(p) = find(&self.hold[from..], &self.needle).map(|r| r + from) else {
                // Keep only what could be the start of a marker.
                let keep = self.needle.len() - 1;
                if self.hold.len() > keep {
                    let cut = self.hold.len() - keep;
                    self.out.push(&self.hold[..cut]);
                    self.hold.drain(..cut);
                }
                return;
            };
            let after = p + self.needle.len();
            match self.hold[after..].iter().position(|&b| b == b'\n') {
                Some(nl) => {
                    let tail = std::str::from_utf8(&self.hold[after..after + nl])
                        .ok()
                        .filter(|t| t.len() <= MAX_TAIL && (self.accept)(t))
                        .map(str::to_owned);
                    if let Some(tail) = tail {
                        self.out.push(&self.hold[..p]);
                        self.hold = Vec::new();
                        self.tail = Some(tail);
                        return;
                    }
                    from = p + 1;
                }
                None if self.hold.len() - after > MAX_TAIL => from = p + 1,
                None => {
                    // The marker may be arriving: wait for the rest of its line.
                    self.out.push(&self.hold[..p]);
                    self.hold.drain(..p);
                    return;
                }
            }
        }
    }

    /// Everything before the marker (or everything, if it never came).
    pub(crate) fn into_text(mut self) -> (String, bool) {
        let held = std::mem::take(&mut self.hold);
        self.out.push(&held);
        self.out.into_text()
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let first = *needle.first()?;
    let mut i = 0;
    while let Some(rel) = hay[i..].iter().position(|&b| b == first) {
        let p = i + rel;
        if hay[p..].starts_with(needle) {
            return Some(p);
        }
        i = p + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digits(t: &str) -> bool {
        !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit())
    }

    #[test]
    fn capped_output_counts_and_notes() {
        let mut c = CappedOutput::new(4);
        c.push(b"abcdef");
        c.push(b"gh");
        let (t, trunc) = c.into_text();
        assert!(trunc);
        assert_eq!(t, "abcd\n[output truncated: 4 bytes over the 4-byte limit]");
    }

    #[test]
    fn capped_output_does_not_split_characters() {
        let mut c = CappedOutput::new(2);
        c.push("aé".as_bytes());
        assert!(c.into_text().0.starts_with("a\n[output"));
    }

    #[test]
    fn scanner_finds_marker_split_across_chunks() {
        let mut s = MarkerScanner::new("\n__END_x__".into(), 100, digits);
        for chunk in [&b"hello\n\n__E"[..], b"ND_x", b"__4", b"2\n"] {
            s.push(chunk);
        }
        assert_eq!(s.tail(), Some("42"));
        assert_eq!(s.into_text().0, "hello\n");
    }

    #[test]
    fn scanner_ignores_forged_markers() {
        let mut s = MarkerScanner::new("\n__END_x__".into(), 100, digits);
        s.push(b"a\n__END_y__1\n\n__END_x__abc\n\n__END_x__");
        assert_eq!(s.tail(), None);
        s.push(b"0\n");
        assert_eq!(s.tail(), Some("0"));
        assert_eq!(s.into_text().0, "a\n__END_y__1\n\n__END_x__abc\n");
    }

    #[test]
    fn scanner_bounds_memory() {
        let mut s = MarkerScanner::new("\n__END_x__".into(), 10, digits);
        for _ in 0..1000 {
            s.push(&[b'y'; 1000]);
        }
        assert!(s.hold.len() < 16);
        assert_eq!(s.seen(), 1_000_000);
        s.push(b"\n__END_x__0\n");
        let (t, trunc) = s.into_text();
        assert!(trunc && t.starts_with("yyyyyyyyyy\n[output truncated: 999990 bytes"));
    }
}
