//! Exact conversion of Kubernetes resource quantities ("100m", "1.5Gi", "1e3") to integers.
//!
//! Parsing is delegated to `kube_quantity`; the scaling to millis or units is done here on the
//! decimal digits with integer arithmetic, so "0.1" is exactly 100 millis and "1.5Gi" exactly
//! 1610612736 bytes. Fractions left after scaling are rounded away from zero, as the
//! `MilliValue()`/`Value()` methods of Kubernetes' `resource.Quantity` do.
//!
//! `kube_quantity` reads the number through an `f64`, so a quantity with more than 15
//! significant digits may lose its last digits; real requests and capacities have far fewer.

use kube_quantity::ParsedQuantity;

/// The syntax of quantities, as Kubernetes words its error.
const QUANTITY_PATTERN: &str = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$";

/// Why a quantity string could not be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// The string is not a Kubernetes quantity.
    #[error("quantities must match the regular expression '{}': {input:?}", QUANTITY_PATTERN)]
    Invalid {
        /// The rejected string.
        input: String,
    },
    /// The quantity is valid but its scaled value does not fit in an `i64`.
    #[error("quantity {input:?} is too large")]
    OutOfRange {
        /// The rejected string.
        input: String,
    },
}

/// The value of `q` in thousandths of a unit (millicores for cpu), rounded away from zero.
pub fn milli_value(q: &str) -> Result<i64, QuantityError> {
    scaled(q, 1000)
}

/// The value of `q` in units (bytes, a count), rounded away from zero.
pub fn value(q: &str) -> Result<i64, QuantityError> {
    scaled(q, 1)
}

/// `q` times `factor`, exactly, rounded away from zero.
fn scaled(q: &str, factor: i128) -> Result<i64, QuantityError> {
    // The common form, whole digits and a suffix ("100m", "64Mi"), is read here directly:
    // this runs for every container's requests and limits on every pod written.
    let digits_end = q.find(|c: char| !c.is_ascii_digit()).unwrap_or(q.len());
    let (digits, suffix) = q.split_at(digits_end);
    match suffix_ratio(suffix) {
        Some((num, den)) if !digits.is_empty() => exact(q, false, digits, "", (num, den), factor),
        _ => parsed_scaled(q, factor),
    }
}

/// `scaled` for any quantity, parsed by kube_quantity.
fn parsed_scaled(q: &str, factor: i128) -> Result<i64, QuantityError> {
    let invalid = || QuantityError::Invalid { input: q.to_owned() };

    // kube_quantity reads a missing number as 0 ("Mi" would be 0 bytes); Kubernetes rejects it.
    let unsigned = q.strip_prefix(['+', '-']).unwrap_or(q);
    if !unsigned.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
        return Err(invalid());
    }
    // kube_quantity's number parser takes the "E" of "1E" / "1Ei" for an exponent with no
    // digits and fails, so the exa suffixes are split off here and applied below.
    let (number, exa) = if let Some(rest) = q.strip_suffix("Ei") {
        (rest, Some(Exa::Binary))
    } else if let Some(rest) = q.strip_suffix('E') {
        (rest, Some(Exa::Decimal))
    } else {
        (q, None)
    };
    if exa.is_some() && number.ends_with(|c: char| !(c.is_ascii_digit() || c == '.')) {
        return Err(invalid());
    }
    let parsed = ParsedQuantity::try_from(number).map_err(|_| invalid())?;
    // The canonical form is "<decimal><suffix>" with a plain decimal number: the one exact
    // view of the parsed value that kube_quantity offers.
    let canonical = parsed.to_string();
    let split = canonical
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-'))
        .unwrap_or(canonical.len());
    let (decimal, suffix) = canonical.split_at(split);
    let (mut num, den) = suffix_ratio(suffix).ok_or_else(invalid)?;
    match exa {
        Some(Exa::Binary) if suffix.is_empty() => num = 1 << 60,
        Some(Exa::Decimal) if suffix.is_empty() => num = 10_i128.pow(18),
        Some(_) => return Err(invalid()),
        None => {}
    }

    let (negative, digits) = match decimal.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, decimal),
    };
    let (int_part, frac_part) = digits.split_once('.').unwrap_or((digits, ""));
    exact(q, negative, int_part, frac_part, (num, den), factor)
}

/// `int_part.frac_part` (decimal digits) times `num / den` times `factor`, exactly, rounded
/// away from zero; `q` is the quantity as written, for errors.
fn exact(
    q: &str,
    negative: bool,
    int_part: &str,
    frac_part: &str,
    (mut num, mut den): (i128, i128),
    factor: i128,
) -> Result<i64, QuantityError> {
    let invalid = || QuantityError::Invalid { input: q.to_owned() };
    let out_of_range = || QuantityError::OutOfRange { input: q.to_owned() };
    let mut mantissa: i128 = 0;
    for digit in int_part.bytes().chain(frac_part.bytes()) {
        if !digit.is_ascii_digit() {
            return Err(invalid());
        }
        mantissa = mantissa
            .checked_mul(10)
            .and_then(|m| m.checked_add(i128::from(digit - b'0')))
            .ok_or_else(out_of_range)?;
    }
    for _ in 0..frac_part.len() {
        den = den.checked_mul(10).ok_or_else(out_of_range)?;
    }
    num = num.checked_mul(factor).ok_or_else(out_of_range)?;
    let product = mantissa.checked_mul(num).ok_or_else(out_of_range)?;
    let mut magnitude = product / den;
    if product % den != 0 {
        magnitude += 1;
    }
    let signed = if negative { -magnitude } else { magnitude };
    i64::try_from(signed).map_err(|_| out_of_range())
}

/// Which exa suffix was split off before parsing.
enum Exa {
    Binary,
    Decimal,
}

/// The suffix of a canonical kube_quantity string as a ratio `num / den`.
fn suffix_ratio(suffix: &str) -> Option<(i128, i128)> {
    Some(match suffix {
        "" => (1, 1),
        "n" => (1, 1_000_000_000),
        "u" => (1, 1_000_000),
        "m" => (1, 1_000),
        "k" => (1_000, 1),
        "M" => (1_000_000, 1),
        "G" => (1_000_000_000, 1),
        "T" => (1_000_000_000_000, 1),
        "P" => (1_000_000_000_000_000, 1),
        "E" => (1_000_000_000_000_000_000, 1),
        "Ki" => (1 << 10, 1),
        "Mi" => (1 << 20, 1),
        "Gi" => (1 << 30, 1),
        "Ti" => (1 << 40, 1),
        "Pi" => (1 << 50, 1),
        "Ei" => (1 << 60, 1),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_in_millis() {
        assert_eq!(milli_value("100m"), Ok(100));
        assert_eq!(milli_value("1"), Ok(1000));
        assert_eq!(milli_value("0.5"), Ok(500));
        assert_eq!(milli_value("0.1"), Ok(100));
        assert_eq!(milli_value("2.25"), Ok(2250));
        assert_eq!(milli_value(".5"), Ok(500));
        assert_eq!(milli_value("+1"), Ok(1000));
        assert_eq!(milli_value("0"), Ok(0));
    }

    #[test]
    fn millis_round_away_from_zero() {
        assert_eq!(milli_value("0.0001"), Ok(1));
        assert_eq!(milli_value("1500u"), Ok(2));
        assert_eq!(milli_value("1n"), Ok(1));
        assert_eq!(milli_value("-1n"), Ok(-1));
        assert_eq!(value("100m"), Ok(1));
        assert_eq!(value("1001m"), Ok(2));
        assert_eq!(value("1000m"), Ok(1));
    }

    #[test]
    fn binary_and_decimal_suffixes() {
        assert_eq!(value("1.5Gi"), Ok(1_610_612_736));
        assert_eq!(value("128Mi"), Ok(134_217_728));
        assert_eq!(value("1Ki"), Ok(1024));
        assert_eq!(value("1k"), Ok(1000));
        assert_eq!(value("2M"), Ok(2_000_000));
        assert_eq!(value("1G"), Ok(1_000_000_000));
        assert_eq!(value("3T"), Ok(3_000_000_000_000));
        assert_eq!(value("1Pi"), Ok(1 << 50));
        assert_eq!(value("1Ei"), Ok(1 << 60));
        assert_eq!(value("2E"), Ok(2_000_000_000_000_000_000));
        assert_eq!(value("110"), Ok(110));
        assert_eq!(milli_value("1k"), Ok(1_000_000));
    }

    #[test]
    fn decimal_exponent() {
        assert_eq!(value("1e3"), Ok(1000));
        assert_eq!(milli_value("1e3"), Ok(1_000_000));
        assert_eq!(value("1.5e3"), Ok(1500));
        assert_eq!(milli_value("1e-3"), Ok(1));
    }

    #[test]
    fn bad_inputs_are_errors() {
        for bad in ["", "abc", "Mi", "m", "1.2.3", "1Qi", "1 Mi", " 1", "1e", "nan", "inf", "1iE"] {
            assert!(
                matches!(value(bad), Err(QuantityError::Invalid { .. })),
                "{bad:?} gave {:?}",
                value(bad)
            );
        }
    }

    #[test]
    fn the_direct_reading_agrees_with_kube_quantity() {
        let suffixes =
            ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
        for digits in ["0", "1", "7", "010", "100", "1500", "999999", "123456789012"] {
            for suffix in suffixes {
                let q = format!("{digits}{suffix}");
                for factor in [1, 1000] {
                    assert_eq!(scaled(&q, factor), parsed_scaled(&q, factor), "{q} x{factor}");
                }
            }
        }
    }

    #[test]
    fn too_large_is_out_of_range() {
        assert!(matches!(value("8Ei"), Err(QuantityError::OutOfRange { .. })));
        assert!(matches!(milli_value("1Ei"), Err(QuantityError::OutOfRange { .. })));
        assert_eq!(value("7Ei"), Ok(7 << 60));
    }
}
