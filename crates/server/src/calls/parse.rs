//! Reading the calls out of the text between a syntax's markers, with the
//! parser of its family.

use super::types::{Call, Catalog, Format, Syntax};
use super::{json, xml};

impl Syntax {
    /// The calls in the text between the markers (or after the opening
    /// marker, for the families whose calls run to the end).
    pub fn parse_body(&self, body: &str, known: &Catalog) -> Option<Vec<Call>> {
        match self.format {
            Format::QwenXml if body.trim_start().starts_with("<function=") => {
                xml::parse(body, known)
            }
            Format::Mistral => json::parse_mistral(body),
            _ => json::parse_any(body, None),
        }
    }
}
