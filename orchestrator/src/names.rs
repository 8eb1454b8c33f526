//! Kubernetes names checked before railsweep uses them: in a pod's spec, a label selector, a
//! manifest it prints or a comment above one. A node name is an RFC 1123 subdomain (what the
//! API server itself requires of it), a namespace an RFC 1123 label. Anything else, a newline
//! above all, is refused with the rule, so that no value of a flag can write YAML of its own.

/// The longest RFC 1123 subdomain (node, pod names).
const SUBDOMAIN_MAX: usize = 253;
/// The longest RFC 1123 label (namespaces).
const LABEL_MAX: usize = 63;

fn label_ok(l: &str) -> bool {
    let b = l.as_bytes();
    !b.is_empty()
        && b.len() <= LABEL_MAX
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}

/// `name` if it is an RFC 1123 subdomain (lowercase letters, digits, `-` and `.`, at most 253
/// characters, each dot-separated part starting and ending with a letter or digit), as node
/// and pod names are; else why not, naming `what`.
pub fn subdomain(what: &str, name: &str) -> Result<String, String> {
    if name.len() <= SUBDOMAIN_MAX && name.split('.').all(label_ok) {
        return Ok(name.to_string());
    }
    Err(format!(
        "{what} `{}` is not a Kubernetes name: give lowercase letters, digits, `-` and `.`, at \
         most {SUBDOMAIN_MAX} characters, starting and ending with a letter or digit (RFC 1123)",
        name.escape_debug()
    ))
}

/// `name` if it is an RFC 1123 label (lowercase letters, digits and `-`, at most 63
/// characters, starting and ending with a letter or digit), as namespaces are.
pub fn label(what: &str, name: &str) -> Result<String, String> {
    if label_ok(name) {
        return Ok(name.to_string());
    }
    Err(format!(
        "{what} `{}` is not a Kubernetes name: give lowercase letters, digits and `-`, at most \
         {LABEL_MAX} characters, starting and ending with a letter or digit (RFC 1123)",
        name.escape_debug()
    ))
}

/// `--namespace`'s value parser.
pub fn namespace(s: &str) -> Result<String, String> {
    label("namespace", s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_names_are_subdomains_and_namespaces_labels() {
        for ok in ["gpu-node-01", "node.example.com", "a", "10-0-0-1"] {
            assert_eq!(subdomain("node", ok).as_deref(), Ok(ok));
        }
        for bad in [
            "",
            "Node",
            "a\n---\nkind: Pod",
            "-a",
            "a-",
            "a..b",
            "a_b",
            "a b",
            &"a".repeat(254),
        ] {
            let e = subdomain("node", bad).err().unwrap_or_default();
            assert!(e.contains("RFC 1123") && !e.contains('\n'), "{bad:?}: {e}");
        }
        assert_eq!(namespace("rdma-tests").as_deref(), Ok("rdma-tests"));
        for bad in ["a.b", "", "kube system", &"a".repeat(64), "ns\n# x"] {
            assert!(namespace(bad).is_err(), "{bad:?}");
        }
    }
}
