//! Pages of a run's transcript (`GET /v1/runs/{id}?messages_from=&messages_limit=`),
//! the same for a run in memory and one read from the history: a page has
//! at most `limit` messages and, after its first, at most
//! [`MESSAGES_PAGE_BYTES`], so no answer holds a whole large transcript.

use crate::api::{MessagePaging, DEFAULT_MESSAGES_LIMIT, MESSAGES_PAGE_BYTES};

/// What the client asked for, already clamped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRequest {
    pub from: u32,
    pub limit: u32,
}

impl PageRequest {
    pub fn new(from: Option<u32>, limit: Option<u32>) -> Self {
        PageRequest {
            from: from.unwrap_or(0),
            limit: limit
                .unwrap_or(DEFAULT_MESSAGES_LIMIT)
                .clamp(1, DEFAULT_MESSAGES_LIMIT),
        }
    }

    /// The first page, as a run's creation answers it.
    pub fn first() -> Self {
        Self::new(None, None)
    }

    /// How many of the messages (sizes in bytes, from `from` on) go into
    /// the page: at least one, when there is one.
    pub fn take(&self, sizes: impl IntoIterator<Item = usize>) -> usize {
        let mut bytes = 0usize;
        let mut n = 0usize;
        for size in sizes {
            if !self.fits(n, bytes, size) {
                break;
            }
            bytes = bytes.saturating_add(size);
            n += 1;
        }
        n
    }

    /// Whether one more message of `size` bytes goes into a page that has
    /// `taken` messages of `bytes` so far.
    pub fn fits(&self, taken: usize, bytes: usize, size: usize) -> bool {
        taken < self.limit as usize
            && (taken == 0 || bytes.saturating_add(size) <= MESSAGES_PAGE_BYTES)
    }

    /// The paging fields of a page of `taken` messages out of `total`.
    pub fn paging(&self, taken: usize, total: usize) -> MessagePaging {
        let end = self.from as usize + taken;
        MessagePaging {
            messages_total: Some(u32::try_from(total).unwrap_or(u32::MAX)),
            messages_from: (self.from > 0).then_some(self.from),
            next_messages_from: (end < total).then(|| u32::try_from(end).unwrap_or(u32::MAX)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_stops_at_its_limit_or_its_bytes_but_holds_at_least_one() {
        let p = PageRequest::new(Some(0), Some(3));
        assert_eq!(p.take([10, 10, 10, 10]), 3);
        assert_eq!(
            p.take([MESSAGES_PAGE_BYTES * 2, 10]),
            1,
            "one huge message alone"
        );
        assert_eq!(p.take([10, MESSAGES_PAGE_BYTES, 10]), 1);
        assert_eq!(p.take([]), 0);
        assert_eq!(PageRequest::new(None, Some(0)).limit, 1);
        assert_eq!(
            PageRequest::new(None, Some(1_000_000)).limit,
            DEFAULT_MESSAGES_LIMIT
        );
    }

    #[test]
    fn the_cursor_points_past_the_page_until_the_end() {
        let p = PageRequest::new(Some(4), Some(2));
        let paging = p.paging(2, 10);
        assert_eq!(paging.messages_total, Some(10));
        assert_eq!(paging.messages_from, Some(4));
        assert_eq!(paging.next_messages_from, Some(6));
        assert_eq!(p.paging(2, 6).next_messages_from, None);
        assert_eq!(
            PageRequest::first().paging(0, 0),
            MessagePaging {
                messages_total: Some(0),
                messages_from: None,
                next_messages_from: None,
            }
        );
    }
}
