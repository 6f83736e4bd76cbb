//! One entry of the API reference. Each area of `api/` keeps the entries of
//! the functions it registers beside the registrations; `docs` assembles
//! them.

/// Documentation of one function, method or property.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FnDoc {
    /// The name scripts use (`delayed`, `result`, `status`).
    pub name: &'static str,
    /// How it is called.
    pub signature: &'static str,
    /// One or two sentences.
    pub summary: &'static str,
    /// A self-contained script that uses it (run by the tests).
    pub example: &'static str,
}

pub(super) const fn doc(
    name: &'static str,
    signature: &'static str,
    summary: &'static str,
    example: &'static str,
) -> FnDoc {
    FnDoc { name, signature, summary, example }
}
