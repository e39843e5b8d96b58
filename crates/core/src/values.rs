//! A list of numbers as a user writes one: `a,b,c`, or an inclusive range `start:stop:step`
//! (`0:1:0.05`). Sweeps, model plots and testbed loads take their points this way.

use std::fmt;
use std::str::FromStr;

/// Most points one list may expand to.
pub const MAX_VALUES: usize = 10_000;

/// The numbers of a list or a range, in order, all finite.
#[derive(Debug, Clone, PartialEq)]
pub struct Values(pub Vec<f64>);

impl FromStr for Values {
    type Err = String;
    fn from_str(s: &str) -> Result<Values, String> {
        let num = |t: &str| -> Result<f64, String> {
            let v: f64 = t
                .trim()
                .parse()
                .map_err(|_| format!("`{t}` is not a number"))?;
            if !v.is_finite() {
                return Err(format!("`{t}` is not finite"));
            }
            Ok(v)
        };
        if s.contains(':') {
            let parts: Vec<&str> = s.split(':').collect();
            let [a, b, step] = parts[..] else {
                return Err("a range is start:stop:step".into());
            };
            let (a, b, step) = (num(a)?, num(b)?, num(step)?);
            if step <= 0.0 || b < a {
                return Err("a range needs start ≤ stop and step > 0".into());
            }
            let n = ((b - a) / step + 1e-9).floor() as usize + 1;
            if n > MAX_VALUES {
                return Err(format!("{n} values; at most {MAX_VALUES}"));
            }
            // Rounding keeps 0.05-steps printable as 0.35 rather than 0.35000000000000003.
            return Ok(Values(
                (0..n)
                    .map(|i| ((a + step * i as f64) * 1e9).round() / 1e9)
                    .collect(),
            ));
        }
        let v: Vec<f64> = s
            .split(',')
            .filter(|t| !t.trim().is_empty())
            .map(num)
            .collect::<Result<_, _>>()?;
        if v.is_empty() {
            return Err("is empty".into());
        }
        Ok(Values(v))
    }
}

impl fmt::Display for Values {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s: Vec<String> = self.0.iter().map(f64::to_string).collect();
        f.write_str(&s.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_ranges() {
        let v = |s: &str| s.parse::<Values>().map(|v| v.0);
        assert_eq!(v("0:1:0.25").unwrap(), vec![0.0, 0.25, 0.5, 0.75, 1.0]);
        assert_eq!(v("0:1:0.05").unwrap().len(), 21);
        assert_eq!(v("0:1:0.05").unwrap()[7], 0.35);
        assert_eq!(v("1,2").unwrap(), vec![1.0, 2.0]);
        assert!(v("1:0:1").is_err());
        assert!(v("1:2").is_err());
        assert!(v("a").unwrap_err().contains("not a number"));
        assert!(v("inf").unwrap_err().contains("not finite"));
        assert_eq!(v(",").unwrap_err(), "is empty");
        assert!(v("0:1e9:1").unwrap_err().contains("at most"));
    }
}
