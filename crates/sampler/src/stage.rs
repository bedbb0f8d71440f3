//! The names of the chain's stages and llama.cpp's two ways of writing an
//! order (`--samplers "penalties;top_k;temperature"` and the one-letter
//! `--sampling-seq ekt`).

use crate::SamplerError;

/// One stage of the sampler chain between the logit bias and the draw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stage {
    /// Repeat, frequency and presence penalties (`e`).
    Penalties,
    /// DRY repetition penalty (`d`).
    Dry,
    /// Top-n-sigma (`s`).
    TopNSigma,
    /// Top-k (`k`).
    TopK,
    /// Locally typical sampling (`y`).
    Typical,
    /// Top-p, nucleus (`p`).
    TopP,
    /// Min-p (`m`).
    MinP,
    /// Exclude top choices (`x`).
    Xtc,
    /// Temperature, with dynamic temperature when its range is set (`t`).
    Temperature,
}

impl Stage {
    /// llama.cpp's default order.
    pub const DEFAULT_ORDER: [Stage; 9] = [
        Stage::Penalties,
        Stage::Dry,
        Stage::TopNSigma,
        Stage::TopK,
        Stage::Typical,
        Stage::TopP,
        Stage::MinP,
        Stage::Xtc,
        Stage::Temperature,
    ];

    /// The canonical name, as llama.cpp prints it.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Penalties => "penalties",
            Stage::Dry => "dry",
            Stage::TopNSigma => "top_n_sigma",
            Stage::TopK => "top_k",
            Stage::Typical => "typ_p",
            Stage::TopP => "top_p",
            Stage::MinP => "min_p",
            Stage::Xtc => "xtc",
            Stage::Temperature => "temperature",
        }
    }

    /// The one-letter name of `--sampling-seq`.
    pub fn letter(self) -> char {
        match self {
            Stage::Penalties => 'e',
            Stage::Dry => 'd',
            Stage::TopNSigma => 's',
            Stage::TopK => 'k',
            Stage::Typical => 'y',
            Stage::TopP => 'p',
            Stage::MinP => 'm',
            Stage::Xtc => 'x',
            Stage::Temperature => 't',
        }
    }

    /// A stage by name: the canonical one, its kebab-case and no-dash
    /// spellings (`top-k`, `topk`) and llama.cpp's aliases (`nucleus`,
    /// `temp`, `typ`, `typical`), in any case.
    pub fn from_name(name: &str) -> Option<Stage> {
        let n = name.trim().to_ascii_lowercase().replace('-', "_");
        let alias = match n.as_str() {
            "nucleus" => Some(Stage::TopP),
            "temp" => Some(Stage::Temperature),
            "typ" | "typical" => Some(Stage::Typical),
            _ => None,
        };
        alias.or_else(|| {
            Stage::DEFAULT_ORDER
                .into_iter()
                .find(|s| s.name() == n || s.name().replace('_', "") == n)
        })
    }

    /// Parses an order: names separated by `;` or `,` (`--samplers`), or a
    /// word of one-letter names (`--sampling-seq`, e.g. `edkypmxt`). An
    /// unknown name is an error, not a silent skip.
    pub fn parse_order(spec: &str) -> Result<Vec<Stage>, SamplerError> {
        let spec = spec.trim();
        let is_letters = !spec.is_empty()
            && !spec.contains([';', ','])
            && Stage::from_name(spec).is_none()
            && spec
                .chars()
                .all(|c| Stage::DEFAULT_ORDER.iter().any(|s| s.letter() == c));
        if is_letters {
            return Ok(spec
                .chars()
                .filter_map(|c| Stage::DEFAULT_ORDER.into_iter().find(|s| s.letter() == c))
                .collect());
        }
        spec.split([';', ','])
            .filter(|n| !n.trim().is_empty())
            .map(|n| Stage::from_name(n).ok_or_else(|| SamplerError::UnknownStage(n.trim().into())))
            .collect()
    }

    /// The order written back as `;`-separated canonical names.
    pub fn format_order(stages: &[Stage]) -> String {
        stages
            .iter()
            .map(|s| s.name())
            .collect::<Vec<_>>()
            .join(";")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_letters_and_aliases_parse() {
        let d = Stage::DEFAULT_ORDER.to_vec();
        assert_eq!(
            Stage::parse_order("penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature")
                .unwrap(),
            d
        );
        assert_eq!(Stage::parse_order("edskypmxt").unwrap(), d);
        assert_eq!(
            Stage::parse_order("Top-K, nucleus ,temp").unwrap(),
            vec![Stage::TopK, Stage::TopP, Stage::Temperature]
        );
        assert_eq!(
            Stage::parse_order("minp;typical").unwrap(),
            vec![Stage::MinP, Stage::Typical]
        );
        assert_eq!(Stage::parse_order("").unwrap(), vec![]);
        assert_eq!(
            Stage::parse_order("top_k;bogus").unwrap_err(),
            SamplerError::UnknownStage("bogus".into())
        );
        assert_eq!(
            Stage::format_order(&d),
            "penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature"
        );
        // A single full name is a name, never a string of letters.
        assert_eq!(
            Stage::parse_order("temp").unwrap(),
            vec![Stage::Temperature]
        );
    }
}
