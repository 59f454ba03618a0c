//! Numbers as GitHub reads and prints them: a string becomes a number the way JavaScript's
//! `Number()` reads it (the reference implementation, actions/languageservices, is TypeScript),
//! and a number prints in fixed notation with at most 15 significant digits and 15 decimals,
//! like .NET's `##########################0.###############` format the Actions runner uses
//! (no exponent, integers without `.0`, `-0` as `0`).

/// Parses a string like JavaScript's `Number(s)`: surrounding whitespace is ignored, the empty
/// string is 0, `0x`/`0o`/`0b` prefixes (unsigned) and decimal literals with an optional sign,
/// fraction and exponent are read, as is `Infinity`; anything else is NaN.
pub fn parse_number(s: &str) -> f64 {
    let s = s.trim_matches(is_js_whitespace);
    if s.is_empty() {
        return 0.0;
    }
    let bytes = s.as_bytes();
    if bytes.len() > 2 && bytes[0] == b'0' {
        let radix = match bytes[1] {
            b'x' | b'X' => Some(16),
            b'o' | b'O' => Some(8),
            b'b' | b'B' => Some(2),
            _ => None,
        };
        if let Some(radix) = radix {
            return parse_radix(&s[2..], radix);
        }
    }
    let (sign, rest) = match bytes[0] {
        b'+' => (1.0, &s[1..]),
        b'-' => (-1.0, &s[1..]),
        _ => (1.0, s),
    };
    if rest == "Infinity" {
        return sign * f64::INFINITY;
    }
    if !is_decimal_literal(rest) {
        return f64::NAN;
    }
    // The grammar was checked above, so Rust's parser (which would also accept `inf`/`nan`)
    // only sees plain decimal literals; it needs a digit before a bare `.`.
    let normalized = if rest.starts_with('.') {
        format!("0{rest}")
    } else {
        rest.to_string()
    };
    normalized.parse::<f64>().map_or(f64::NAN, |n| sign * n)
}

fn parse_radix(digits: &str, radix: u32) -> f64 {
    if digits.is_empty() {
        return f64::NAN;
    }
    let mut value = 0.0_f64;
    for c in digits.chars() {
        match c.to_digit(radix) {
            Some(d) => value = value * f64::from(radix) + f64::from(d),
            None => return f64::NAN,
        }
    }
    value
}

/// `digits [. digits] [e [+-] digits]` or `. digits [...]`: at least one mantissa digit.
fn is_decimal_literal(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    let int_digits = count_digits(&b[i..]);
    i += int_digits;
    let mut frac_digits = 0;
    if b.get(i) == Some(&b'.') {
        i += 1;
        frac_digits = count_digits(&b[i..]);
        i += frac_digits;
    }
    if int_digits + frac_digits == 0 {
        return false;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let exp_digits = count_digits(&b[i..]);
        if exp_digits == 0 {
            return false;
        }
        i += exp_digits;
    }
    i == b.len()
}

fn count_digits(b: &[u8]) -> usize {
    b.iter().take_while(|c| c.is_ascii_digit()).count()
}

/// JavaScript's `String.prototype.trim` whitespace: Unicode white space plus the BOM.
fn is_js_whitespace(c: char) -> bool {
    c.is_whitespace() || c == '\u{feff}'
}

/// Prints a number the way GitHub does: `NaN`, `Infinity`, `-Infinity`, otherwise fixed
/// notation rounded to 15 significant digits and at most 15 decimals, without trailing zeros.
pub fn format_number(n: f64) -> String {
    if n.is_nan() {
        return "NaN".into();
    }
    if n.is_infinite() {
        return if n > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if n == 0.0 {
        return "0".into();
    }
    // 15 significant digits: d.dddddddddddddde±x
    let sci = format!("{:.14e}", n.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: Vec<u8> = mantissa.bytes().filter(u8::is_ascii_digit).collect();
    // digits[0] is the 10^exp place.
    let (int_part, frac_part) = if exp >= 0 {
        let split = usize::try_from(exp + 1).unwrap_or(usize::MAX);
        if split >= digits.len() {
            let mut int = digits.clone();
            int.resize(split, b'0');
            (int, Vec::new())
        } else {
            (digits[..split].to_vec(), digits[split..].to_vec())
        }
    } else {
        let zeros = usize::try_from(-exp - 1).unwrap_or(0);
        let mut frac = vec![b'0'; zeros];
        frac.extend_from_slice(&digits);
        (vec![b'0'], frac)
    };
    let (int_part, frac_part) = round_fraction(int_part, frac_part, 15);
    let frac = String::from_utf8(frac_part).unwrap_or_default();
    let frac = frac.trim_end_matches('0');
    let int = String::from_utf8(int_part).unwrap_or_default();
    let body = if frac.is_empty() {
        int
    } else {
        format!("{int}.{frac}")
    };
    if body == "0" {
        "0".into()
    } else if n < 0.0 {
        format!("-{body}")
    } else {
        body
    }
}

/// Rounds a decimal digit string to `max` fraction digits, half away from zero, carrying into
/// the integer part.
fn round_fraction(mut int: Vec<u8>, mut frac: Vec<u8>, max: usize) -> (Vec<u8>, Vec<u8>) {
    if frac.len() <= max {
        return (int, frac);
    }
    let round_up = frac[max] >= b'5';
    frac.truncate(max);
    if round_up {
        let mut carry = true;
        for d in frac.iter_mut().rev().chain(int.iter_mut().rev()) {
            if *d == b'9' {
                *d = b'0';
            } else {
                *d += 1;
                carry = false;
                break;
            }
        }
        if carry {
            int.insert(0, b'1');
        }
    }
    (int, frac)
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_case::test_case;

    #[test_case("", 0.0; "empty is zero")]
    #[test_case("  ", 0.0; "blank is zero")]
    #[test_case(" 12 ", 12.0; "trimmed")]
    #[test_case("0x1F", 31.0; "hex")]
    #[test_case("0o17", 15.0; "octal")]
    #[test_case("0b101", 5.0; "binary")]
    #[test_case("1.5e3", 1500.0; "exponent")]
    #[test_case("-.5", -0.5; "leading dot")]
    #[test_case("5.", 5.0; "trailing dot")]
    #[test_case("+Infinity", f64::INFINITY; "signed infinity")]
    #[test_case("-Infinity", f64::NEG_INFINITY; "negative infinity")]
    fn parses_like_javascript(s: &str, want: f64) {
        assert_eq!(parse_number(s), want);
    }

    #[test_case("abc"; "word")]
    #[test_case("-0x10"; "signed hex")]
    #[test_case("0x"; "bare prefix")]
    #[test_case("1e"; "bare exponent")]
    #[test_case("."; "bare dot")]
    #[test_case("inf"; "rust infinity spelling")]
    #[test_case("nan"; "rust nan spelling")]
    #[test_case("1_000"; "underscores")]
    #[test_case("1 2"; "inner space")]
    fn rejects_what_javascript_rejects(s: &str) {
        assert!(parse_number(s).is_nan(), "{s}");
    }

    #[test_case(1.0, "1")]
    #[test_case(-0.0, "0")]
    #[test_case(0.5, "0.5")]
    #[test_case(-123_456.789, "-123456.789")]
    #[test_case(0.845_512_408_225_57, "0.84551240822557")]
    #[test_case(1e21, "1000000000000000000000")]
    #[test_case(123_456_789_012_345_678.0, "123456789012346000")]
    #[test_case(1e-20, "0")]
    #[test_case(1.234_567_89e-10, "0.000000000123457")]
    #[test_case(0.1 + 0.2, "0.3")]
    #[test_case(9.999_999_999_999_999e-16, "0.000000000000001")]
    #[test_case(f64::NAN, "NaN")]
    #[test_case(f64::NEG_INFINITY, "-Infinity")]
    fn prints_like_github(n: f64, want: &str) {
        assert_eq!(format_number(n), want);
    }
}
