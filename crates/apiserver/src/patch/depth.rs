//! A linear scan that bounds a YAML document's nesting before it is parsed.
//!
//! It counts flow collections (`[`, `{`) outside quoted scalars and comments, block mappings by
//! indentation, and compact block sequences (`- - x`). It may over-count (a block scalar's
//! indented lines), never under-count what the parser would nest.

/// True when `body` nests deeper than `max`.
pub(crate) fn exceeds(body: &[u8], max: usize) -> bool {
    let mut indents: Vec<usize> = Vec::new();
    let mut flow = 0usize;
    for line in body.split(|b| *b == b'\n') {
        let mut i = 0;
        if flow == 0 {
            let indent = line.iter().take_while(|b| **b == b' ').count();
            let rest = &line[indent..];
            if rest.is_empty() || rest[0] == b'#' || rest == b"\r" {
                continue;
            }
            while indents.last().is_some_and(|&top| top >= indent) {
                indents.pop();
            }
            indents.push(indent);
            let mut j = indent;
            let mut dashes = 0;
            while j < line.len() && line[j] == b'-' && (j + 1 == line.len() || line[j + 1] == b' ')
            {
                dashes += 1;
                j += 1;
                while j < line.len() && line[j] == b' ' {
                    j += 1;
                }
            }
            if indents.len() + dashes > max {
                return true;
            }
            i = j;
        }
        let mut quote: Option<u8> = None;
        while i < line.len() {
            let b = line[i];
            let token_start = i == 0 || matches!(line[i - 1], b' ' | b'[' | b'{' | b',' | b':');
            match quote {
                Some(q) if b == q => quote = None,
                Some(b'"') if b == b'\\' => i += 1,
                Some(_) => {}
                None => match b {
                    b'"' | b'\'' if token_start => quote = Some(b),
                    b'#' if i == 0 || line[i - 1] == b' ' => break,
                    b'[' | b'{' => {
                        flow += 1;
                        if indents.len() + flow > max {
                            return true;
                        }
                    }
                    b']' | b'}' => flow = flow.saturating_sub(1),
                    _ => {}
                },
            }
            i += 1;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::exceeds;

    #[test]
    fn counts_flow_block_and_sequence_nesting() {
        let flow = format!("{}{}", "[".repeat(10), "]".repeat(10));
        assert!(!exceeds(flow.as_bytes(), 11));
        assert!(exceeds(flow.as_bytes(), 9));
        let block: String = (0..10)
            .map(|d| format!("{}k{d}:\n", "  ".repeat(d)))
            .collect();
        assert!(!exceeds(block.as_bytes(), 10));
        assert!(exceeds(block.as_bytes(), 9));
        assert!(exceeds(b"- - - - x\n", 4));
        assert!(!exceeds(b"- - - - x\n", 5));
    }

    #[test]
    fn brackets_in_quotes_and_comments_do_not_count() {
        let doc = "a: \"[[[[[[\"\nb: '{{{{{{'\nc: x # [[[[[[\nd: it's [fine]\n";
        assert!(!exceeds(doc.as_bytes(), 3));
    }

    #[test]
    fn an_ordinary_manifest_is_shallow() {
        let doc = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: {a: b}\nspec:\n  containers:\n  - name: c\n    image: busybox\n    args: [\"--x\", \"y\"]\n";
        assert!(!exceeds(doc.as_bytes(), 8));
    }
}
