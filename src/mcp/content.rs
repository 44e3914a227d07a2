//! A `tools/call` result as the model's observation: text content joined,
//! everything else described in one line each (type, size, URI), since a
//! chat model is shown text. `isError` makes it an error observation.

use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

/// The observation for `result`: `Ok` text, or `Err` when the server set
/// `isError`.
pub fn observation(result: &CallToolResult) -> Result<String, String> {
    let mut parts: Vec<String> = result.content.iter().map(describe).collect();
    if parts.is_empty() {
        if let Some(structured) = &result.structured_content {
            parts.push(structured.to_string());
        }
    }
    let text = parts.join("\n");
    if result.is_error == Some(true) {
        Err(if text.is_empty() {
            "the MCP tool reported an error and said nothing more".into()
        } else {
            text
        })
    } else {
        Ok(text)
    }
}

/// Bytes that base64 `data` decodes to (without decoding it).
fn decoded_len(data: &str) -> usize {
    let data = data.trim_end();
    let pad = data.bytes().rev().take_while(|b| *b == b'=').count();
    (data.len() / 4 * 3 + [0, 0, 1, 2][data.len() % 4]).saturating_sub(pad)
}

fn describe(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(t) => t.text.clone(),
        ContentBlock::Image(i) => {
            format!("[image: {}, {} bytes]", i.mime_type, decoded_len(&i.data))
        }
        ContentBlock::Audio(a) => {
            format!("[audio: {}, {} bytes]", a.mime_type, decoded_len(&a.data))
        }
        ContentBlock::Resource(r) => match &r.resource {
            ResourceContents::TextResourceContents {
                uri,
                mime_type,
                text,
                ..
            } => format!(
                "[resource: {uri}, {}, {} bytes of text]\n{text}",
                mime_type.as_deref().unwrap_or("text"),
                text.len()
            ),
            ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => format!(
                "[resource: {uri}, {}, {} bytes]",
                mime_type.as_deref().unwrap_or("application/octet-stream"),
                decoded_len(blob)
            ),
            _ => "[resource of a kind agentd does not know]".into(),
        },
        ContentBlock::ResourceLink(l) => {
            let mut line = format!("[resource link: {}", l.uri);
            if let Some(mime) = &l.mime_type {
                line.push_str(&format!(", {mime}"));
            }
            if let Some(size) = l.size {
                line.push_str(&format!(", {size} bytes"));
            }
            line.push_str(&format!(", \"{}\"]", l.name));
            line
        }
        // A kind newer than this client: named, not dropped silently.
        #[allow(unreachable_patterns)]
        _ => "[content of a kind agentd does not know]".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_lengths() {
        assert_eq!(decoded_len(""), 0);
        assert_eq!(decoded_len("aGk="), 2);
        assert_eq!(decoded_len("aGVsbG8="), 5);
        assert_eq!(decoded_len("aGVsbG8h"), 6);
    }

    #[test]
    fn text_and_others() {
        let r: CallToolResult = serde_json::from_value(serde_json::json!({
            "content": [
                {"type": "text", "text": "one"},
                {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"},
                {"type": "resource_link", "uri": "https://x/r.pdf", "name": "r", "mimeType": "application/pdf"},
                {"type": "text", "text": "two"}
            ]
        }))
        .unwrap();
        assert_eq!(
            observation(&r).unwrap(),
            "one\n[image: image/png, 5 bytes]\n[resource link: https://x/r.pdf, application/pdf, \"r\"]\ntwo"
        );
        let e: CallToolResult = serde_json::from_value(serde_json::json!({
            "content": [{"type": "text", "text": "no such file"}], "isError": true
        }))
        .unwrap();
        assert_eq!(observation(&e), Err("no such file".into()));
    }
}
