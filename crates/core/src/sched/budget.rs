//! A class's ring budget, the one type every door uses: the config file (`budget = 60` or
//! `"auto"`), the simulator and testbed flags (`rt=60,be=auto`) and `ctl budget set`.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::num::NonZeroU32;
use std::str::FromStr;

/// How many packets a class's ring may consume per turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(try_from = "BudgetValue", into = "BudgetValue")]
pub enum Budget {
    /// The strategy's default for the class's place (ll-wfq: 60 for the highest class, 4 below).
    #[default]
    Default,
    /// A fixed number of packets; never 0, since a ring with budget 0 starves.
    Packets(NonZeroU32),
    /// Set by the worker from the measured RT load by paper 000's Eq. 2 (ll-wfq, a lower class,
    /// with a target in `auto-budget`).
    Auto,
}

impl Budget {
    /// `n` packets; `None` for 0.
    pub fn packets(n: u32) -> Option<Budget> {
        NonZeroU32::new(n).map(Budget::Packets)
    }

    /// The fixed number of packets, if that is what it is.
    pub fn fixed(self) -> Option<u32> {
        match self {
            Budget::Packets(n) => Some(n.get()),
            _ => None,
        }
    }

    pub fn is_auto(self) -> bool {
        self == Budget::Auto
    }
}

/// Why a budget does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BudgetError {
    #[error("ring budget 0: must be at least 1 packet (≥ 1), or the ring starves")]
    Zero,
    #[error("expected a number of packets or \"auto\", not `{0}`")]
    NotABudget(String),
}

impl FromStr for Budget {
    type Err = BudgetError;
    fn from_str(s: &str) -> Result<Budget, BudgetError> {
        match s.trim() {
            "auto" => Ok(Budget::Auto),
            "default" => Ok(Budget::Default),
            t => match t.parse::<u32>() {
                Ok(n) => Budget::packets(n).ok_or(BudgetError::Zero),
                Err(_) => Err(BudgetError::NotABudget(t.to_string())),
            },
        }
    }
}

impl fmt::Display for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Budget::Default => f.write_str("default"),
            Budget::Packets(n) => write!(f, "{n}"),
            Budget::Auto => f.write_str("auto"),
        }
    }
}

/// A budget as written: a number or a word.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
enum BudgetValue {
    Count(u32),
    Word(String),
}

impl TryFrom<BudgetValue> for Budget {
    type Error = BudgetError;
    fn try_from(v: BudgetValue) -> Result<Budget, BudgetError> {
        match v {
            BudgetValue::Count(n) => Budget::packets(n).ok_or(BudgetError::Zero),
            BudgetValue::Word(w) => w.parse(),
        }
    }
}

impl From<Budget> for BudgetValue {
    fn from(b: Budget) -> BudgetValue {
        match b {
            Budget::Packets(n) => BudgetValue::Count(n.get()),
            b => BudgetValue::Word(b.to_string()),
        }
    }
}

/// `class=value`, one item of a per-class list such as `--budgets rt=60,be=auto` or
/// `--weights rt=3,be=1`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerClass<T> {
    pub class: String,
    pub value: T,
}

/// One class's budget: `be=auto`.
pub type ClassBudget = PerClass<Budget>;

impl<T: FromStr> FromStr for PerClass<T>
where
    T::Err: fmt::Display,
{
    type Err = String;
    fn from_str(s: &str) -> Result<PerClass<T>, String> {
        let (class, v) = s
            .trim()
            .split_once('=')
            .ok_or_else(|| format!("`{s}` is not of the form name=value"))?;
        let class = class.trim();
        if class.is_empty() {
            return Err(format!("`{s}` has an empty name"));
        }
        let value = v
            .trim()
            .parse()
            .map_err(|e| format!("`{class}`: `{}`: {e}", v.trim()))?;
        Ok(PerClass {
            class: class.to_string(),
            value,
        })
    }
}

impl<T: fmt::Display> fmt::Display for PerClass<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.class, self.value)
    }
}

/// The first class named twice in `items`, if any.
pub fn repeated_class<T>(items: &[PerClass<T>]) -> Option<&str> {
    items
        .iter()
        .enumerate()
        .find(|(i, a)| items[..*i].iter().any(|b| b.class == a.class))
        .map(|(_, a)| a.class.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_parse_print_and_refuse_zero() {
        assert_eq!("auto".parse::<Budget>(), Ok(Budget::Auto));
        assert_eq!("60".parse::<Budget>().unwrap().fixed(), Some(60));
        assert_eq!("0".parse::<Budget>(), Err(BudgetError::Zero));
        assert!(matches!(
            "x".parse::<Budget>(),
            Err(BudgetError::NotABudget(_))
        ));
        for b in [Budget::Default, Budget::Auto, Budget::packets(4).unwrap()] {
            assert_eq!(b.to_string().parse::<Budget>(), Ok(b));
        }
        let cb: ClassBudget = "be=auto".parse().unwrap();
        assert_eq!(cb.value, Budget::Auto);
        assert_eq!(cb.to_string(), "be=auto");
        assert!("be".parse::<ClassBudget>().is_err());
        let w: Vec<PerClass<u32>> = vec!["a=1".parse().unwrap(), "b=2".parse().unwrap()];
        assert_eq!(repeated_class(&w), None);
        let w2: Vec<PerClass<u32>> = vec![w[0].clone(), w[1].clone(), w[0].clone()];
        assert_eq!(repeated_class(&w2), Some("a"));
        assert!("be=0"
            .parse::<ClassBudget>()
            .unwrap_err()
            .contains("at least 1"));
    }
}
