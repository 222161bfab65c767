//! Kubernetes resource quantities ("100m", "1.5Gi", "1e3"): their exact conversion to
//! integers, and the canonical text Kubernetes writes back for a quantity it decoded.
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
    /// The quantity's suffix is none Kubernetes knows ("1Qi" is caught by the syntax, "1mi" and
    /// "1e" here), worded as Kubernetes words it.
    #[error("unable to parse quantity's suffix")]
    Suffix,
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

/// The value of `q` in thousandths of a unit, rounded away from zero, where an `i64` is not
/// wide enough: for sums of amounts (quota usage) that must not wrap. Read as Kubernetes
/// reads quantities (binary ones capped at the largest `i64`).
pub fn milli_value_wide(q: &str) -> Result<i128, QuantityError> {
    let trimmed = q.trim();
    let out_of_range = || QuantityError::OutOfRange { input: q.to_owned() };
    if trimmed.is_empty() {
        return Err(QuantityError::Invalid { input: q.to_owned() });
    }
    let scanned = scan(trimmed).ok_or_else(|| QuantityError::Invalid { input: q.to_owned() })?;
    let (base, exponent, format) = interpret(scanned.suffix).ok_or(QuantityError::Suffix)?;
    let exact = scanned.exact(base, exponent, format).ok_or_else(out_of_range)?;
    exact.millis().ok_or_else(out_of_range)
}

/// `q` times `factor`, exactly, rounded away from zero.
fn scaled(q: &str, factor: i128) -> Result<i64, QuantityError> {
    let wide = scaled_wide(q, factor)?;
    i64::try_from(wide).map_err(|_| QuantityError::OutOfRange { input: q.to_owned() })
}

/// `q` times `factor`, exactly, rounded away from zero, in an `i128`.
fn scaled_wide(q: &str, factor: i128) -> Result<i128, QuantityError> {
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
fn parsed_scaled(q: &str, factor: i128) -> Result<i128, QuantityError> {
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
) -> Result<i128, QuantityError> {
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
    Ok(if negative { -magnitude } else { magnitude })
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

/// The text Kubernetes writes for quantity `text` once decoded (its `resource.Quantity`
/// read and written back), or `None` when that is `text` itself, which is the common case and
/// costs no allocation:
///
/// - surrounding white space goes;
/// - the value is kept exactly, rounded up (away from zero) to whole nano units;
/// - it is written in the family of its suffix: binary ("1024Mi" -> "1Gi", "1.5Gi" ->
///   "1536Mi"; below 1024 or not whole, as decimal: "0.5Ki" -> "512"), decimal SI ("1000m" ->
///   "1", "0.5" -> "500m", "1.5k" -> "1500") or with an exponent ("1e1" -> "10", "1e3" ->
///   "1e3"), with the digits that are left once the exponent is the multiple of three at or
///   below the value's;
/// - a text Kubernetes' fast reader finds already in that form is kept as written ("100m",
///   "+1", "1.500k").
///
/// A number too long to be held exactly in 128 bits is kept as written. A decimal value past
/// the last SI suffix is written with an exponent ("1000E" -> "1e21"), where Kubernetes 1.32
/// drops the exponent and so the value.
pub fn canonical(text: &str) -> Result<Option<String>, QuantityError> {
    let q = text.trim();
    let kept = || Ok((q.len() != text.len()).then(|| q.to_owned()));
    if q.is_empty() {
        return Err(QuantityError::Invalid { input: text.to_owned() });
    }
    let scanned = scan(q).ok_or_else(|| QuantityError::Invalid { input: text.to_owned() })?;
    let (base, exponent, format) = interpret(scanned.suffix).ok_or(QuantityError::Suffix)?;
    if q == "0" || scanned.is_kept_as_written(base, exponent, format) {
        return kept();
    }
    let Some(written) = scanned.exact(base, exponent, format).and_then(|v| v.written()) else {
        return kept();
    };
    Ok((written.as_str() != text).then(|| written.as_str().to_owned()))
}

/// A number of thousandths of a unit as a quantity's canonical text; in powers of 1024 when
/// `binary` and a whole number of KiB ("1200Mi"), as Kubernetes writes a sum of binary
/// quantities.
pub fn from_millis(millis: i128, binary: bool) -> String {
    let text = match millis.checked_div(1000) {
        Some(units) if binary && millis % 1000 == 0 && units % 1024 == 0 => {
            format!("{}Ki", units / 1024)
        }
        _ => format!("{millis}m"),
    };
    canonical(&text).ok().flatten().unwrap_or(text)
}

/// The format `q` is written in (`None` when it is not a quantity): a sum of quantities keeps
/// the format of its first non-zero term, as Kubernetes' `Quantity.Add` does.
pub fn format_of(q: &str) -> Option<Format> {
    let q = q.trim();
    if q.is_empty() {
        return None;
    }
    interpret(scan(q)?.suffix).map(|(_, _, format)| format)
}

/// A number of thousandths of a unit as Kubernetes writes a quantity of that value in
/// `format`: "2G" for two billion in decimal SI, "1953125Ki" in binary SI.
pub fn written(millis: i128, format: Format) -> String {
    let exact = Exact { negative: millis < 0, mantissa: millis.unsigned_abs(), exp10: -3, format };
    exact.written().map_or_else(|| format!("{millis}m"), |text| text.as_str().to_owned())
}

/// `q` rounded up (away from zero) to a whole thousandth, as Kubernetes' `RoundUp(-3)` of
/// every amount in a resource list: `100u` is `1m`, `1500u` `2m`. `None` when `q` is whole in
/// thousandths already, or not a quantity (left to validation).
pub fn rounded_to_millis(q: &str) -> Option<String> {
    // Only a fraction, a micro or nano suffix or an exponent can hold less than a thousandth
    // (a quick look, as this runs for every amount written).
    if !q.bytes().any(|b| matches!(b, b'.' | b'u' | b'n' | b'e' | b'E')) {
        return None;
    }
    let millis = milli_value_wide(q).ok()?;
    let whole = format!("{millis}m");
    (compare(q, &whole)? != std::cmp::Ordering::Equal).then(|| from_millis(millis, false))
}

/// How quantity `a` compares with quantity `b` by value, exactly; `None` when either is not
/// a quantity or has more digits than 128 bits hold.
pub fn compare(a: &str, b: &str) -> Option<std::cmp::Ordering> {
    exact_value(a)?.compare(&exact_value(b)?)
}

fn exact_value(q: &str) -> Option<Exact> {
    let q = q.trim();
    if q.is_empty() {
        return None;
    }
    let scanned = scan(q)?;
    let (base, exponent, format) = interpret(scanned.suffix)?;
    scanned.exact(base, exponent, format)
}

/// How a quantity was written, which decides how Kubernetes writes it back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Format {
    /// A power of ten by SI suffix ("100m", "2k") or none.
    #[default]
    DecimalSi,
    /// A power of 1024 ("64Mi").
    BinarySi,
    /// A power of ten by exponent ("1e3").
    DecimalExponent,
}

/// A quantity's text split as Kubernetes' scanner splits it.
struct Scanned<'a> {
    negative: bool,
    /// The whole digits without leading zeros; "0" when none are left.
    num: &'a str,
    /// The digits after the point.
    denom: &'a str,
    suffix: &'a str,
}

/// Splits `q` into sign, digits and suffix, or `None` when it does not have that syntax.
/// As Kubernetes' scanner, it takes a missing number for zero ("Mi", ".").
fn scan(q: &str) -> Option<Scanned<'_>> {
    let bytes = q.as_bytes();
    let digits_from = |mut at: usize| {
        while bytes.get(at).is_some_and(u8::is_ascii_digit) {
            at += 1;
        }
        at
    };
    let negative = bytes[0] == b'-';
    let mut at = usize::from(matches!(bytes[0], b'-' | b'+'));
    while bytes.get(at) == Some(&b'0') {
        at += 1;
    }
    let num_end = digits_from(at);
    let num = if num_end == at { "0" } else { &q[at..num_end] };
    at = num_end;
    let mut denom = "";
    if bytes.get(at) == Some(&b'.') {
        let denom_end = digits_from(at + 1);
        denom = &q[at + 1..denom_end];
        at = denom_end;
    }
    let suffix_start = at;
    while bytes.get(at).is_some_and(|b| b"eEinumkKMGTP".contains(b)) {
        at += 1;
    }
    if matches!(bytes.get(at), Some(b'+' | b'-')) {
        at += 1;
    }
    (digits_from(at) == q.len()).then(|| Scanned {
        negative,
        num,
        denom,
        suffix: &q[suffix_start..],
    })
}

/// A suffix's base (10 or 2), exponent and format.
fn interpret(suffix: &str) -> Option<(u32, i32, Format)> {
    const DECIMAL: [(&str, i32); 10] = [
        ("n", -9),
        ("u", -6),
        ("m", -3),
        ("", 0),
        ("k", 3),
        ("M", 6),
        ("G", 9),
        ("T", 12),
        ("P", 15),
        ("E", 18),
    ];
    const BINARY: [&str; 6] = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    if let Some((_, exponent)) = DECIMAL.iter().find(|(s, _)| *s == suffix) {
        return Some((10, *exponent, Format::DecimalSi));
    }
    if let Some(i) = BINARY.iter().position(|s| *s == suffix) {
        return Some((2, 10 * (i as i32 + 1), Format::BinarySi));
    }
    let exponent = suffix.strip_prefix(['e', 'E']).filter(|rest| !rest.is_empty())?;
    // Kubernetes reads the exponent as an int64 and cuts it to an int32; one beyond an
    // int32 is refused here.
    Some((10, exponent.parse().ok()?, Format::DecimalExponent))
}

/// The powers of ten an `u128` holds.
fn pow10(n: u32) -> Option<u128> {
    10u128.checked_pow(n)
}

impl Scanned<'_> {
    /// Whether Kubernetes' fast reader keeps this text as the quantity's written form: a value
    /// of at most 18 digits, in whole nano units, that is already canonical (a decimal one
    /// whose digits neither start with a zero nor end in three, at a multiple of three; a
    /// binary one whose number is not a multiple of 8).
    fn is_kept_as_written(&self, base: u32, exponent: i32, format: Format) -> bool {
        let digits = self.num.len() + self.denom.len();
        let all_digits = || self.num.bytes().chain(self.denom.bytes());
        let (precision, scale, mantissa_bits) = if base == 10 {
            (18 - digits as i64, i64::from(exponent) - self.denom.len() as i64, 0)
        } else if self.denom.is_empty() {
            (15 - self.num.len() as i64 - i64::from(exponent) * 3 / 10 - 1, 0, exponent as u32)
        } else {
            return false;
        };
        if precision < 0 || scale < -9 {
            return false;
        }
        let value = all_digits().fold(0i64, |v, d| v * 10 + i64::from(d - b'0'));
        if value.checked_mul(1 << mantissa_bits).is_none() {
            return false;
        }
        match format {
            Format::BinarySi => value & 7 != 0,
            Format::DecimalSi | Format::DecimalExponent => {
                let ends_in_000 = digits >= 3 && all_digits().rev().take(3).all(|d| d == b'0');
                scale % 3 == 0 && !ends_in_000 && all_digits().next() != Some(b'0')
            }
        }
    }

    /// The exact value, rounded up to nano units and capped as Kubernetes caps binary ones
    /// (at the largest `i64`); `None` when it does not fit in 128 bits.
    fn exact(&self, base: u32, exponent: i32, format: Format) -> Option<Exact> {
        let mut mantissa: u128 = 0;
        for d in self.num.bytes().chain(self.denom.bytes()) {
            mantissa = mantissa.checked_mul(10)?.checked_add(u128::from(d - b'0'))?;
        }
        let mut exp10 = -(self.denom.len() as i64);
        if base == 10 {
            exp10 += i64::from(exponent);
        } else {
            mantissa = mantissa.checked_mul(1u128 << exponent)?;
        }
        if mantissa == 0 {
            return Some(Exact { negative: false, mantissa, exp10: 0, format });
        }
        if exp10 < -9 {
            let shift = u32::try_from(-9 - exp10).unwrap_or(u32::MAX);
            mantissa = pow10(shift).map_or(1, |divisor| mantissa.div_ceil(divisor));
            exp10 = -9;
        }
        let mut exact = Exact { negative: self.negative, mantissa, exp10, format };
        if format == Format::BinarySi && exact.exceeds_i64_max() {
            exact.mantissa = i64::MAX as u128;
            exact.exp10 = 0;
        }
        Some(exact)
    }
}

/// A quantity's exact magnitude, `mantissa * 10^exp10`, its sign, and its format.
struct Exact {
    negative: bool,
    mantissa: u128,
    exp10: i64,
    format: Format,
}

impl Exact {
    /// The value, if it is whole and fits.
    fn whole(&self) -> Option<u128> {
        if self.exp10 >= 0 {
            self.mantissa.checked_mul(pow10(u32::try_from(self.exp10).ok()?)?)
        } else {
            let divisor = pow10(u32::try_from(-self.exp10).ok()?)?;
            self.mantissa.is_multiple_of(divisor).then(|| self.mantissa / divisor)
        }
    }

    /// Whether the magnitude is over the largest `i64`.
    fn exceeds_i64_max(&self) -> bool {
        let max = i64::MAX as u128;
        match u32::try_from(self.exp10) {
            Ok(up) => pow10(up).and_then(|p| self.mantissa.checked_mul(p)).is_none_or(|v| v > max),
            Err(_) => {
                let down = u32::try_from(-self.exp10).unwrap_or(u32::MAX);
                pow10(down).and_then(|p| max.checked_mul(p)).is_some_and(|cap| self.mantissa > cap)
            }
        }
    }

    /// The value in thousandths, rounded away from zero; `None` past 128 bits.
    fn millis(&self) -> Option<i128> {
        let shift = self.exp10 + 3;
        let magnitude = match u32::try_from(shift) {
            Ok(up) => self.mantissa.checked_mul(pow10(up)?)?,
            Err(_) => {
                let down = u32::try_from(-shift).unwrap_or(u32::MAX);
                pow10(down).map_or(u128::from(self.mantissa != 0), |d| self.mantissa.div_ceil(d))
            }
        };
        let magnitude = i128::try_from(magnitude).ok()?;
        Some(if self.negative { -magnitude } else { magnitude })
    }

    /// How this value compares with `other`'s; `None` when aligning their exponents does not
    /// fit in 128 bits.
    fn compare(&self, other: &Exact) -> Option<std::cmp::Ordering> {
        let sign = |e: &Exact| match (e.mantissa, e.negative) {
            (0, _) => 0,
            (_, true) => -1,
            (_, false) => 1,
        };
        let (mine, theirs) = (sign(self), sign(other));
        if mine != theirs || mine == 0 {
            return Some(mine.cmp(&theirs));
        }
        let least = self.exp10.min(other.exp10);
        let aligned = |e: &Exact| {
            let up = u32::try_from(e.exp10 - least).ok()?;
            e.mantissa.checked_mul(pow10(up)?)
        };
        let magnitude = aligned(self)?.cmp(&aligned(other)?);
        Some(if mine < 0 { magnitude.reverse() } else { magnitude })
    }

    /// The canonical text, or `None` when its digits do not fit in 128 bits.
    fn written(mut self) -> Option<StackText> {
        use std::fmt::Write as _;
        let mut out = StackText::default();
        if self.mantissa == 0 {
            out.push_str("0");
            return Some(out);
        }
        if self.negative {
            out.push_str("-");
        }
        if self.format == Format::BinarySi {
            if let Some(mut whole) = self.whole().filter(|v| *v >= 1024) {
                let mut power = 0;
                while whole % 1024 == 0 && power < 6 {
                    whole /= 1024;
                    power += 1;
                }
                let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][power];
                let _ = write!(out, "{whole}{suffix}");
                return Some(out);
            }
            // Below 1024 or not whole: written as decimal.
            self.format = Format::DecimalSi;
        }
        while self.mantissa.is_multiple_of(10) {
            self.mantissa /= 10;
            self.exp10 += 1;
        }
        let below = self.exp10.rem_euclid(3);
        self.mantissa = self.mantissa.checked_mul(pow10(below as u32)?)?;
        self.exp10 -= below;
        let si = match self.exp10 {
            -9 => Some("n"),
            -6 => Some("u"),
            -3 => Some("m"),
            0 => Some(""),
            3 => Some("k"),
            6 => Some("M"),
            9 => Some("G"),
            12 => Some("T"),
            15 => Some("P"),
            18 => Some("E"),
            _ => None,
        };
        let _ = match (self.format, si) {
            (_, Some("")) => write!(out, "{}", self.mantissa),
            (Format::DecimalSi, Some(suffix)) => write!(out, "{}{suffix}", self.mantissa),
            _ => write!(out, "{}e{}", self.mantissa, self.exp10),
        };
        Some(out)
    }
}

/// Text written on the stack: a canonical quantity (at most 39 digits, a sign and an
/// exponent) is compared with the text it came from without allocating.
struct StackText {
    bytes: [u8; 64],
    len: usize,
}

impl Default for StackText {
    fn default() -> Self {
        StackText { bytes: [0; 64], len: 0 }
    }
}

impl StackText {
    fn push_str(&mut self, s: &str) {
        let _ = std::fmt::Write::write_str(self, s);
    }

    fn as_str(&self) -> &str {
        // Only whole `&str`s are written, within the buffer.
        std::str::from_utf8(&self.bytes[..self.len]).unwrap_or_default()
    }
}

impl std::fmt::Write for StackText {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        let slot = self.bytes.get_mut(self.len..end).ok_or(std::fmt::Error)?;
        slot.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
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
                    assert_eq!(scaled_wide(&q, factor), parsed_scaled(&q, factor), "{q} x{factor}");
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

    /// What Kubernetes 1.32 writes back for each quantity, as `kubectl get -o json` shows it.
    #[test]
    fn quantities_are_written_back_as_kubernetes_writes_them() {
        let cases = [
            ("1000m", "1"),
            ("1024Mi", "1Gi"),
            ("0.5", "500m"),
            ("1.5k", "1500"),
            ("1.5Gi", "1536Mi"),
            ("2048Ki", "2Mi"),
            ("1536Ki", "1536Ki"),
            ("0.5Ki", "512"),
            ("1.5Ki", "1536"),
            ("1e1", "10"),
            ("12e1", "120"),
            ("1e-3", "1e-3"),
            ("1E3", "1E3"),
            ("10E2", "1e3"),
            ("1e-20", "1e-9"),
            ("0.1n", "1n"),
            ("-0.1n", "-1n"),
            ("0.0000000001", "1n"),
            ("100000", "100k"),
            ("1200000", "1200k"),
            ("1.0", "1"),
            ("01.0", "1"),
            ("-0", "0"),
            ("0Ki", "0"),
            ("Mi", "0"),
            (".", "0"),
            ("8Ei", "9223372036854775807"),
            ("-8Ei", "-9223372036854775807"),
            ("1000E", "1e21"),
            ("1000000E", "1e24"),
            ("0.5Gi", "512Mi"),
            ("1.1Ki", "1126400m"),
            (" 1 ", "1"),
        ];
        for (written, expected) in cases {
            let back = canonical(written).unwrap().unwrap_or_else(|| written.to_owned());
            assert_eq!(back, expected, "{written:?}");
        }
    }

    #[test]
    fn quantities_already_canonical_are_kept_as_written() {
        for q in ["0", "1", "100m", "64Mi", "1Gi", "3Ki", "1e3", "10e3", "+1", "1.500k", "250m"] {
            assert_eq!(canonical(q), Ok(None), "{q:?}");
        }
        // Kept by Kubernetes' fast reader although not what its writer would write.
        assert_eq!(canonical("01"), Ok(None));
    }

    #[test]
    fn millis_are_written_as_quantities() {
        assert_eq!(from_millis(1500, false), "1500m");
        assert_eq!(from_millis(2000, false), "2");
        assert_eq!(from_millis(0, true), "0");
        assert_eq!(from_millis(1_258_291_200_000, true), "1200Mi");
        assert_eq!(from_millis(1_258_291_200_000, false), "1258291200");
        assert_eq!(from_millis(1_000_000, true), "1k");
    }

    #[test]
    fn millis_are_written_in_a_given_format() {
        assert_eq!(written(2_000_000_000_000, Format::DecimalSi), "2G");
        assert_eq!(written(2_000_000_000_000, Format::BinarySi), "1953125Ki");
        assert_eq!(written(1_524_500_000_000, Format::BinarySi), "1524500000");
        assert_eq!(written(512_000, Format::BinarySi), "512");
        assert_eq!(written(1500, Format::BinarySi), "1500m");
        assert_eq!(written(3_000_000, Format::DecimalExponent), "3e3");
        assert_eq!(written(-250, Format::DecimalSi), "-250m");
        assert_eq!(written(0, Format::BinarySi), "0");
        assert_eq!(format_of("2G"), Some(Format::DecimalSi));
        assert_eq!(format_of("64Mi"), Some(Format::BinarySi));
        assert_eq!(format_of("1e3"), Some(Format::DecimalExponent));
        assert_eq!(format_of("x"), None);
    }

    #[test]
    fn wide_millis_hold_what_an_i64_does_not() {
        assert_eq!(milli_value_wide("1e30"), Ok(10_i128.pow(33)));
        assert_eq!(
            milli_value_wide("8Ei"),
            Ok(i128::from(i64::MAX) * 1000),
            "capped as Go caps it"
        );
        assert_eq!(milli_value_wide("-1"), Ok(-1000));
        assert_eq!(milli_value_wide("1n"), Ok(1));
        assert_eq!(milli_value_wide("1.5Gi"), Ok(1_610_612_736_000));
        assert_eq!(
            milli_value_wide("1e40"),
            Err(QuantityError::OutOfRange { input: "1e40".into() })
        );
        assert!(matches!(milli_value_wide("x"), Err(QuantityError::Invalid { .. })));
    }

    #[test]
    fn quantities_compare_by_value() {
        use std::cmp::Ordering::*;
        for (a, b, expected) in [
            ("1", "1000m", Equal),
            ("1Gi", "1024Mi", Equal),
            ("2", "1500m", Greater),
            ("100m", "0.2", Less),
            ("-1", "0", Less),
            ("0", "-0", Equal),
            ("-2", "-1", Less),
            ("1Ki", "1k", Greater),
            ("1e3", "1k", Equal),
        ] {
            assert_eq!(compare(a, b), Some(expected), "{a} vs {b}");
        }
        assert_eq!(compare("1", "x"), None);
    }

    #[test]
    fn quantities_of_another_syntax_are_refused() {
        for bad in ["", " ", "abc", "1 Mi", "1.2.3", "1Qi", "1e1.5"] {
            assert!(matches!(canonical(bad), Err(QuantityError::Invalid { .. })), "{bad:?}");
        }
        for bad in ["1e", "1mi", "1iE", "1Ki3", "1e-", "1e99999999999", "--1"] {
            assert_eq!(canonical(bad), Err(QuantityError::Suffix), "{bad:?}");
        }
    }

    #[test]
    fn amounts_finer_than_a_thousandth_round_up_to_one() {
        for (given, rounded) in [
            ("100u", Some("1m")),
            ("1500u", Some("2m")),
            ("1n", Some("1m")),
            ("-1500u", Some("-2m")),
            ("0.0001", Some("1m")),
            ("100m", None),
            ("1Gi", None),
            ("0.5", None),
            ("x", None),
        ] {
            assert_eq!(rounded_to_millis(given).as_deref(), rounded, "{given}");
        }
    }
}
