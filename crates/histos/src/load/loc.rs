//! Where in a document an error is: a chain of borrowed keys, rendered (`tools.t.args.x`,
//! `tools.t.resource.where[0]`) only when an error is reported, so loading a valid
//! policy formats no paths.

use crate::value::NON_STRING_KEY_PREFIX;

/// A position in a policy document.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Loc<'a> {
    /// The document itself.
    Root,
    /// A key under a parent.
    Key(&'a Loc<'a>, &'a str),
    /// A list element under a parent.
    Index(&'a Loc<'a>, usize),
}

impl<'a> Loc<'a> {
    /// A top-level key.
    pub(crate) fn top(k: &'a str) -> Loc<'a> {
        Loc::Key(&Loc::Root, k)
    }

    /// A key under this position.
    pub(crate) fn key(&'a self, k: &'a str) -> Loc<'a> {
        Loc::Key(self, k)
    }

    /// A list element under this position.
    pub(crate) fn index(&'a self, i: usize) -> Loc<'a> {
        Loc::Index(self, i)
    }

    /// The dotted path (`tools.t.args.x`).
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out
    }

    fn write(&self, out: &mut String) {
        match self {
            Loc::Root => {}
            Loc::Key(p, k) => {
                p.write(out);
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k.trim_start_matches(NON_STRING_KEY_PREFIX));
            }
            Loc::Index(p, i) => {
                p.write(out);
                out.push_str(&format!("[{i}]"));
            }
        }
    }
}
