//! Text from the model and from tools, made safe to print on a terminal.
//!
//! A model can be talked into writing anything, and a tool prints whatever
//! its command printed: escape sequences in that text would be obeyed by the
//! operator's terminal (set the window title, write the clipboard with OSC
//! 52, clear the screen, hide text, on some terminals answer back with
//! input). So what `run`, `show` and `logs` print for people goes through
//! [`terminal_safe`]; `--json` output does not, because it is data (JSON
//! escapes control characters itself) and must stay exact.

use std::borrow::Cow;

const ESC: char = '\u{1b}';
const BEL: char = '\u{07}';

/// `s` without terminal control: whole escape sequences (CSI `ESC [ … final`,
/// OSC/DCS/APC/PM/SOS strings up to BEL or `ESC \`, and two-character
/// escapes), C0 controls except newline and tab, DEL, and C1 controls
/// (U+0080–U+009F, which some terminals obey like `ESC` + a letter). A
/// carriage return goes too: it lets text overwrite the line it is on.
/// Borrows when there is nothing to remove, the usual case.
pub fn terminal_safe(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_removed) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c != ESC {
            if !is_removed(c) {
                out.push(c);
            }
            continue;
        }
        match chars.next() {
            // CSI: parameters and intermediates, then one final byte.
            Some('[') => {
                for c in chars.by_ref() {
                    if ('\u{40}'..='\u{7e}').contains(&c) {
                        break;
                    }
                }
            }
            // Strings: OSC, DCS, SOS, PM, APC, ended by BEL or ST (`ESC \`).
            Some(']' | 'P' | 'X' | '^' | '_') => {
                while let Some(c) = chars.next() {
                    if c == BEL {
                        break;
                    }
                    if c == ESC {
                        if chars.peek() == Some(&'\\') {
                            chars.next();
                        }
                        break;
                    }
                }
            }
            // `ESC` + one character (`ESC c` resets the terminal), or a
            // lone ESC at the end.
            Some(_) | None => {}
        }
    }
    Cow::Owned(out)
}

fn is_removed(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t') || c == ESC
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_newlines_and_tabs_pass_untouched() {
        let s = "line 1\n\tindented — ünïcode ✓\n";
        assert!(matches!(terminal_safe(s), Cow::Borrowed(_)));
        assert_eq!(terminal_safe(s), s);
    }

    #[test]
    fn escape_sequences_are_removed_whole() {
        let cases = [
            // The review's probe: title, clipboard (OSC 52), clear screen.
            (
                "a\u{1b}]0;owned\u{07}b\u{1b}]52;c;ZWNobyBvd25lZA==\u{07}c\u{1b}[2Jd",
                "abcd",
            ),
            ("red \u{1b}[1;31mALERT\u{1b}[0m done", "red ALERT done"),
            (
                "osc with st \u{1b}]8;;http://x\u{1b}\\link\u{1b}]8;;\u{1b}\\",
                "osc with st link",
            ),
            ("reset\u{1b}c!", "reset!"),
            ("dcs \u{1b}Pq#0;2;0;0;0\u{1b}\\end", "dcs end"),
            ("cut at the end \u{1b}", "cut at the end "),
            ("cut in a csi \u{1b}[12", "cut in a csi "),
        ];
        for (input, want) in cases {
            assert_eq!(terminal_safe(input), want, "{input:?}");
        }
    }

    #[test]
    fn other_controls_go_but_newline_and_tab_stay() {
        assert_eq!(
            terminal_safe("a\rb\u{08}c\u{07}d\u{7f}e\u{9b}31mf\u{85}g\u{0}h\n\ti"),
            "abcde31mfgh\n\ti"
        );
    }
}
