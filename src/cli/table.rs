//! Text tables and the short forms (ages, durations, cut strings) they hold.

/// Columns sized to their widest cell; the last column is not padded, so a
/// long last cell never leaves trailing blanks.
#[derive(Debug)]
pub struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new<const N: usize>(headers: [&str; N]) -> Self {
        Table {
            rows: vec![headers.iter().map(|h| h.to_string()).collect()],
        }
    }

    /// Control characters in a cell (a newline in a daemon's string) would
    /// break the rows apart; they become spaces.
    pub fn row(&mut self, cells: Vec<String>) {
        let clean = |c: String| {
            if c.chars().any(char::is_control) {
                c.chars()
                    .map(|ch| if ch.is_control() { ' ' } else { ch })
                    .collect()
            } else {
                c
            }
        };
        self.rows.push(cells.into_iter().map(clean).collect());
    }

    /// One line per row, each ending with `\n`.
    pub fn render(&self) -> String {
        let columns = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let mut widths = vec![0; columns];
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for row in &self.rows {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                if i + 1 == row.len() {
                    line.push_str(cell);
                } else {
                    let pad = widths[i] - cell.chars().count();
                    line.push_str(cell);
                    line.extend(std::iter::repeat_n(' ', pad + 2));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// At most `max` characters; a cut is marked with `…` (counted in `max`).
pub fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let keep: String = s.chars().take(max.saturating_sub(1)).collect();
    format!("{keep}…")
}

/// The first line, cut to `max`; a cut or a dropped line shows `…`.
pub fn first_line(s: &str, max: usize) -> String {
    let mut lines = s.trim().lines();
    let first = lines.next().unwrap_or("");
    if lines.next().is_some() && first.chars().count() < max {
        format!("{first}…")
    } else {
        truncate(first, max)
    }
}

/// How long ago, in the largest unit that fits: `45s`, `12m`, `3h`, `9d`.
pub fn age(then_ms: i64, now_ms: i64) -> String {
    let s = (now_ms - then_ms).max(0) / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86400),
    }
}

/// A running time, finer than [`age`]: `4.2s`, `3m07s`, `2h05m`.
pub fn duration(ms: i64) -> String {
    let ms = ms.max(0);
    let s = ms / 1000;
    match s {
        0..60 => format!("{}.{}s", s, (ms % 1000) / 100),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// A run's cost in the prices' own currency (agentd does not know which),
/// to a millionth, since a short run on a cheap model costs fractions of a
/// cent; `-` when no price is configured.
pub fn cost(cost: Option<f64>) -> String {
    cost.map_or_else(|| "-".to_string(), |c| format!("{c:.6}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_on_the_widest_cell() {
        let mut t = Table::new(["ID", "STATE", "REQUEST"]);
        t.row(vec!["abc".into(), "running".into(), "do things".into()]);
        t.row(vec!["abc\ndef".into(), "ended".into(), "".into()]);
        assert_eq!(
            t.render(),
            "ID       STATE    REQUEST\n\
             abc      running  do things\n\
             abc def  ended\n"
        );
    }

    #[test]
    fn wide_characters_count_as_one() {
        let mut t = Table::new(["A", "B"]);
        t.row(vec!["é…".into(), "x".into()]);
        assert_eq!(t.render(), "A   B\né…  x\n");
    }

    #[test]
    fn truncation_marks_the_cut_and_keeps_the_limit() {
        assert_eq!(truncate("hello", 5), "hello");
        assert_eq!(truncate("hello world", 5), "hell…");
        assert_eq!(truncate("ééééé", 3), "éé…");
        assert_eq!(first_line("  fix it\nthen test", 50), "fix it…");
        assert_eq!(first_line(&"x".repeat(60), 50).chars().count(), 50);
        assert_eq!(first_line("", 50), "");
    }

    #[test]
    fn ages_and_durations() {
        assert_eq!(age(0, 45_000), "45s");
        assert_eq!(age(0, 12 * 60_000 + 5), "12m");
        assert_eq!(age(0, 3 * 3_600_000), "3h");
        assert_eq!(age(0, 9 * 86_400_000), "9d");
        assert_eq!(age(10, 0), "0s", "clock skew is not negative");
        assert_eq!(duration(4_250), "4.2s");
        assert_eq!(duration(187_000), "3m07s");
        assert_eq!(duration(7_500_000), "2h05m");
    }
}
