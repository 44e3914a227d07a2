//! Newline-delimited JSON from a byte stream.
//!
//! HTTP chunks are cut wherever the transport likes, so an event may arrive
//! in pieces or several in one chunk; lines are only handed on once whole.

/// A single event carries at most a tool output (capped by the sandbox at
/// `output_limit`, 1 MiB by default) plus its JSON escaping; anything far
/// beyond that is a stream gone wrong, not an event.
pub const MAX_LINE: usize = 64 << 20;

#[derive(Debug, Default)]
pub struct LineSplitter {
    pending: Vec<u8>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("an event line is longer than {MAX_LINE} bytes")]
pub struct LineTooLong;

impl LineSplitter {
    /// The lines this chunk completes, without their `\n` (or `\r\n`);
    /// blank lines (keep-alives) are skipped.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<Vec<u8>>, LineTooLong> {
        let mut lines = Vec::new();
        let mut rest = chunk;
        while let Some(at) = rest.iter().position(|&b| b == b'\n') {
            self.pending.extend_from_slice(&rest[..at]);
            rest = &rest[at + 1..];
            let mut line = std::mem::take(&mut self.pending);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if !line.iter().all(u8::is_ascii_whitespace) {
                lines.push(line);
            }
        }
        if self.pending.len() + rest.len() > MAX_LINE {
            return Err(LineTooLong);
        }
        self.pending.extend_from_slice(rest);
        Ok(lines)
    }

    /// What is left when the stream ends: a last line sent without its
    /// newline still counts.
    pub fn finish(self) -> Option<Vec<u8>> {
        let mut line = self.pending;
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        (!line.iter().all(u8::is_ascii_whitespace)).then_some(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split_all(chunks: &[&[u8]]) -> Vec<String> {
        let mut s = LineSplitter::default();
        let mut out = Vec::new();
        for c in chunks {
            out.extend(s.push(c).expect("short lines"));
        }
        out.extend(s.finish());
        out.into_iter()
            .map(|l| String::from_utf8(l).expect("utf8"))
            .collect()
    }

    #[test]
    fn lines_cut_across_chunks_are_joined() {
        assert_eq!(
            split_all(&[b"{\"a\":", b"1}\n{\"b\"", b":2}\n"]),
            ["{\"a\":1}", "{\"b\":2}"]
        );
    }

    #[test]
    fn several_lines_in_one_chunk_and_one_byte_chunks() {
        let text = b"{\"a\":1}\r\n\n{\"b\":2}\n{\"c\":3}";
        assert_eq!(split_all(&[text]), ["{\"a\":1}", "{\"b\":2}", "{\"c\":3}"]);
        let bytes: Vec<&[u8]> = text.chunks(1).collect();
        assert_eq!(split_all(&bytes), ["{\"a\":1}", "{\"b\":2}", "{\"c\":3}"]);
    }

    #[test]
    fn a_multibyte_character_cut_in_two_survives() {
        let text = "{\"t\":\"é\"}\n".as_bytes();
        let (a, b) = text.split_at(7);
        assert_eq!(split_all(&[a, b]), ["{\"t\":\"é\"}"]);
    }

    #[test]
    fn an_endless_line_is_refused() {
        let mut s = LineSplitter::default();
        let big = vec![b'x'; MAX_LINE];
        assert!(s.push(&big).expect("at the limit").is_empty());
        assert_eq!(s.push(b"y"), Err(LineTooLong));
    }
}
