//! Text for the XML answers (S3, WebDAV, WMS).

/// Text for an XML 1.0 document: markup escaped, and the characters it
/// cannot carry at all (control characters but tab and line breaks,
/// U+FFFE, U+FFFF; keys hold none, but error messages may echo a request)
/// replaced by U+FFFD.
pub fn escape(s: &str) -> String {
    let carried = |c: char| {
        (matches!(c, '\t' | '\n' | '\r') || !c.is_control()) && c != '\u{FFFE}' && c != '\u{FFFF}'
    };
    let s: std::borrow::Cow<str> = match s.chars().all(carried) {
        true => s.into(),
        false => s
            .chars()
            .map(|c| if carried(c) { c } else { '\u{FFFD}' })
            .collect::<String>()
            .into(),
    };
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&apos;")
}
