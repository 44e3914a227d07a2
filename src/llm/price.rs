//! What a model's tokens cost: `[llm] input_price` / `output_price`, per
//! million tokens in the operator's currency, the unit OpenAI and most
//! providers publish their prices in. agentd never converts currencies:
//! a cost is in whatever currency the prices were written in.

use crate::chat::Usage;

/// One model's prices, as in force for a run. Either may be unset; a run's
/// cost is known once at least one is set (the other then counts as 0, as
/// for a local model that bills only its output, or nothing).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Price {
    /// Per million input (prompt) tokens.
    pub input: Option<f64>,
    /// Per million output (completion) tokens.
    pub output: Option<f64>,
}

impl Price {
    /// Whether any price is set: without one a run's cost is unknown
    /// (`null`), not 0.
    pub fn is_set(&self) -> bool {
        self.input.is_some() || self.output.is_some()
    }

    /// The cost of `usage` at these prices; `None` when no price is set.
    pub fn cost(&self, usage: Usage) -> Option<f64> {
        if !self.is_set() {
            return None;
        }
        // u64 → f64 loses precision only past 2^53 tokens: not a real count.
        let per_token = |price: Option<f64>, tokens: u64| price.unwrap_or(0.0) * tokens as f64;
        Some(
            (per_token(self.input, usage.prompt_tokens)
                + per_token(self.output, usage.completion_tokens))
                / 1_000_000.0,
        )
    }
}

/// A price as written in the configuration: a finite number, 0 or more.
pub fn check_price(value: f64) -> Result<f64, String> {
    if value.is_finite() && value >= 0.0 {
        Ok(value)
    } else {
        Err(format!(
            "must be a price per million tokens (a number, 0 or more), not {value}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(prompt_tokens: u64, completion_tokens: u64) -> Usage {
        Usage {
            prompt_tokens,
            completion_tokens,
        }
    }

    #[test]
    fn cost_is_per_million_tokens_and_unknown_without_a_price() {
        let price = Price {
            input: Some(2.5),
            output: Some(10.0),
        };
        let cost = price.cost(usage(1_000, 200)).expect("priced");
        assert!((cost - (1_000.0 * 2.5 + 200.0 * 10.0) / 1e6).abs() < 1e-12);
        assert_eq!(Price::default().cost(usage(1_000, 200)), None);
        let output_only = Price {
            input: None,
            output: Some(1.0),
        };
        assert_eq!(output_only.cost(usage(5, 1_000_000)), Some(1.0));
    }

    #[test]
    fn a_price_is_finite_and_not_negative() {
        assert_eq!(check_price(0.0), Ok(0.0));
        assert!(check_price(-1.0).is_err());
        assert!(check_price(f64::NAN).is_err());
        assert!(check_price(f64::INFINITY).is_err());
    }
}
