//! The expression language end to end: hundreds of our own cases as tables (value, coercion,
//! operator, function and error cases), spans, templates, conditions, static accesses,
//! `hashFiles`, `gpuflow eval`, and property tests that nothing panics.

use std::ops::Range;

use crate::support::gpuflow;
use gpuflow::expr::{
    self, ErrorKind, JobStatus, MapContext, Value, evaluate, parse, parse_condition, parse_template,
};
use proptest::prelude::*;
use serde_json::json;

fn ctx() -> MapContext {
    let c = |v: serde_json::Value| Value::from_json(v);
    MapContext::new()
        .with(
            "github",
            c(json!({
                "ref": "refs/heads/main",
                "event_name": "push",
                "sha": "abc123",
                "actor": "Mona",
                "event": {"issue": {"labels": [{"name": "bug"}, {"name": "Help"}, {"other": 1}]}}
            })),
        )
        .with(
            "env",
            c(json!({"CI": "true", "EMPTY": "", "NUM": "42", "HEX": " 0x10 ", "ZERO": "0"})),
        )
        .with(
            "matrix",
            c(json!({"os": "linux", "gpu": 2, "flags": ["a", "b"], "cfg": {"Fast": true}})),
        )
        .with(
            "steps",
            c(json!({"build": {"outputs": {"x": "1", "json": "{\"a\": [1, 2]}"}, "outcome": "success"}})),
        )
        .with("arr", c(json!([1, "two", null, true, {"k": "v"}, [3]])))
        .with("nums", c(json!([1, 2, 3])))
        .with("words", c(json!(["Foo", "bar", "BAZ"])))
        .with("obj", c(json!({"A": 1, "b": {"c": [10, 20]}, "Mixed-Case": "m", "": "blank"})))
        .with(
            "jobs",
            c(json!([{"name": "a", "gpus": 1}, {"name": "b", "gpus": 4}, {"name": "c"}])),
        )
        .with("nested", c(json!({"x": {"y": {"z": "deep"}}, "list": [[1, 2], [3, 4]]})))
        .with("empty_arr", c(json!([])))
        .with("empty_obj", c(json!({})))
        .with("nothing", Value::Null)
        .with("t", Value::Bool(true))
        .with("f", Value::Bool(false))
        .with("s", Value::String("Hello World".into()))
}

/// `Kind rendering`: scalars as GitHub prints them, containers as compact JSON.
fn show(v: &Value) -> String {
    let body = match v {
        Value::Array(_) | Value::Object(_) => v.to_json().to_string(),
        other => other.to_expr_string(),
    };
    format!("{} {body}", v.kind())
}

fn outcome(src: &str, ctx: &MapContext) -> String {
    match parse(src).and_then(|e| evaluate(&e, ctx)) {
        Ok(v) => show(&v),
        Err(e) => format!(
            "err {}",
            match e.kind {
                ErrorKind::Lex => "lexing",
                ErrorKind::Parse => "parsing",
                ErrorKind::Evaluation => "evaluation",
            }
        ),
    }
}

fn check_table(cases: &[(&str, &str)]) {
    check_table_in(cases, &ctx());
}

fn check_table_in(cases: &[(&str, &str)], ctx: &MapContext) {
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|(src, want)| {
            let got = outcome(src, ctx);
            (got != *want).then(|| format!("  {src:?}: want {want:?}, got {got:?}"))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn literals() {
    check_table(&[
        ("null", "Null "),
        ("true", "Boolean true"),
        ("false", "Boolean false"),
        ("0", "Number 0"),
        ("42", "Number 42"),
        ("-7", "Number -7"),
        ("+7", "Number 7"),
        ("3.25", "Number 3.25"),
        (".25", "Number 0.25"),
        ("-.25", "Number -0.25"),
        ("5.", "Number 5"),
        ("0xff", "Number 255"),
        ("0XFF", "Number 255"),
        ("0x0", "Number 0"),
        ("0o17", "Number 15"),
        ("0b1010", "Number 10"),
        ("1.2e3", "Number 1200"),
        ("1.2E+3", "Number 1200"),
        ("12e-1", "Number 1.2"),
        ("NaN", "Number NaN"),
        ("Infinity", "Number Infinity"),
        ("-Infinity", "Number -Infinity"),
        ("+Infinity", "Number Infinity"),
        ("-0", "Number 0"),
        ("'text'", "String text"),
        ("''", "String "),
        ("'it''s'", "String it's"),
        ("''''", "String '"),
        ("'  spaced  '", "String   spaced  "),
        ("'ünïcødé ✓'", "String ünïcødé ✓"),
        ("'a\"b'", "String a\"b"),
        ("'{0}'", "String {0}"),
        ("  42  ", "Number 42"),
        ("\t\ntrue\n", "Boolean true"),
        ("", "Null "),
        ("   ", "Null "),
        ("(1)", "Number 1"),
        ("((('x')))", "String x"),
        ("1e21", "Number 1000000000000000000000"),
        ("0.1", "Number 0.1"),
        ("123456789012345678", "Number 123456789012346000"),
        ("0.123456789012345678", "Number 0.123456789012346"),
        ("1e-16", "Number 0"),
        ("0.000001", "Number 0.000001"),
        ("9007199254740993", "Number 9007199254740990"),
    ]);
}

#[test]
fn lexing_errors() {
    check_table(&[
        ("1 = 2", "err lexing"),
        ("1 =2", "err lexing"),
        ("a & b", "err lexing"),
        ("a | b", "err lexing"),
        ("'open", "err lexing"),
        ("'it''s", "err lexing"),
        ("0x", "err lexing"),
        ("0xG", "err lexing"),
        ("-0x1", "err lexing"),
        ("1e", "err lexing"),
        ("1e+", "err lexing"),
        ("-", "err lexing"),
        ("+", "err lexing"),
        ("-Inf", "err lexing"),
        ("-NaN", "err lexing"),
        ("1_000", "err lexing"),
        ("1.2.3", "err lexing"),
        ("\"double\"", "err lexing"),
        ("a/b", "err lexing"),
        ("@", "err lexing"),
        ("#x", "err lexing"),
        ("$x", "err lexing"),
        ("ünï", "err lexing"),
        ("1 + 2", "err lexing"),
        ("1 ~ 2", "err lexing"),
        ("a ? b : c", "err lexing"),
        (".github/x", "err lexing"),
        ("...", "err lexing"),
        ("1..2", "err lexing"),
        ("'a' 'b", "err lexing"),
    ]);
}

#[test]
fn parsing_errors() {
    check_table(&[
        ("1 <", "err parsing"),
        ("< 1", "err parsing"),
        ("1 2", "err parsing"),
        ("(1", "err parsing"),
        ("1)", "err parsing"),
        ("()", "err parsing"),
        ("(1, 2)", "err parsing"),
        ("[1]", "err parsing"),
        ("github.", "err parsing"),
        ("github.1", "err parsing"),
        ("github.'a'", "err parsing"),
        ("github.(x)", "err parsing"),
        ("github[", "err parsing"),
        ("github[]", "err parsing"),
        ("github['a'", "err parsing"),
        ("github['a'))", "err parsing"),
        ("!", "err parsing"),
        ("1 ==", "err parsing"),
        ("== 1", "err parsing"),
        ("&& true", "err parsing"),
        ("true ||", "err parsing"),
        ("true || || false", "err parsing"),
        ("*", "err parsing"),
        ("github *", "err parsing"),
        ("nope()", "err parsing"),
        ("startswith2('a', 'b')", "err parsing"),
        ("contains('a')", "err parsing"),
        ("contains('a', 'b', 'c')", "err parsing"),
        ("startsWith()", "err parsing"),
        ("endsWith('a')", "err parsing"),
        ("format()", "err parsing"),
        ("join()", "err parsing"),
        ("join(1, 2, 3)", "err parsing"),
        ("toJSON()", "err parsing"),
        ("toJSON(1, 2)", "err parsing"),
        ("fromJSON()", "err parsing"),
        ("hashFiles()", "err parsing"),
        ("case(true, 1)", "err parsing"),
        ("case(true, 1, false, 2)", "err parsing"),
        ("case()", "err parsing"),
        ("success(1)", "err parsing"),
        ("always(true)", "err parsing"),
        ("format('{0}', 1", "err parsing"),
        ("format('{0}' 1)", "err parsing"),
        ("format(,)", "err parsing"),
        ("toJSON(1,)", "err parsing"),
        ("false && nope()", "err parsing"),
        ("true || contains(1)", "err parsing"),
        ("github.sha()", "err parsing"),
        ("(github)()", "err parsing"),
    ]);
}

#[test]
fn property_and_index_access() {
    check_table(&[
        ("github.sha", "String abc123"),
        ("GITHUB.SHA", "String abc123"),
        ("github['sha']", "String abc123"),
        ("github['SHA']", "String abc123"),
        ("github.nope", "Null "),
        ("github.nope.deeper", "Null "),
        ("github['nope']", "Null "),
        ("nothing.x", "Null "),
        ("nothing[0]", "Null "),
        ("unknown_context", "Null "),
        ("unknown_context.x", "Null "),
        ("s.length", "Null "),
        ("s[0]", "Null "),
        ("t.x", "Null "),
        ("matrix.gpu", "Number 2"),
        ("matrix.flags[0]", "String a"),
        ("matrix.flags[1]", "String b"),
        ("matrix.flags[2]", "Null "),
        ("matrix.flags[-1]", "Null "),
        ("matrix.flags[1.9]", "String b"),
        ("matrix.flags['1']", "String b"),
        ("matrix.flags[' 1 ']", "String b"),
        ("matrix.flags['0x1']", "String b"),
        ("matrix.flags['one']", "Null "),
        ("matrix.flags[true]", "String b"),
        ("matrix.flags[false]", "String a"),
        ("matrix.flags[null]", "String a"),
        ("matrix.flags[NaN]", "Null "),
        ("matrix.flags[Infinity]", "Null "),
        ("matrix.flags[matrix.flags]", "Null "),
        ("matrix.flags.length", "Null "),
        ("matrix.cfg.fast", "Boolean true"),
        ("matrix['cfg']['FAST']", "Boolean true"),
        ("obj.a", "Number 1"),
        ("obj['mixed-case']", "String m"),
        ("obj.MIXED-CASE", "String m"),
        ("obj['']", "String blank"),
        ("obj[null]", "String blank"),
        ("obj.b.c[1]", "Number 20"),
        ("obj['b']['c'][0]", "Number 10"),
        ("obj[obj]", "Null "),
        ("obj[empty_arr]", "Null "),
        ("nested.x.y.z", "String deep"),
        ("nested.list[1][0]", "Number 3"),
        ("nested['list'][0][1]", "Number 2"),
        ("arr[4].k", "String v"),
        ("arr[5][0]", "Number 3"),
        ("arr[2]", "Null "),
        ("steps.build.outputs.x", "String 1"),
        ("steps.build.outputs['x']", "String 1"),
        ("steps['build'].outcome", "String success"),
        ("steps.missing.outputs.x", "Null "),
        ("fromJSON(steps.build.outputs.json).a[1]", "Number 2"),
        ("fromJSON('[10, 20]')[1]", "Number 20"),
        ("(fromJSON('{\"k\": 3}')).k", "Number 3"),
        ("toJSON(matrix.flags)[0]", "Null "),
        ("github.event.issue.labels[0].name", "String bug"),
        ("obj[1]", "Null "),
        ("matrix.true", "Null "),
        ("matrix.null", "Null "),
        ("words[matrix.gpu]", "String BAZ"),
        ("words[nums[0]]", "String bar"),
    ]);
}

#[test]
fn object_filters() {
    check_table(&[
        ("nums.*", "Array [1,2,3]"),
        ("nums[*]", "Array [1,2,3]"),
        ("matrix.cfg.*", "Array [true]"),
        ("jobs.*.name", "Array [\"a\",\"b\",\"c\"]"),
        ("jobs[*].name", "Array [\"a\",\"b\",\"c\"]"),
        ("jobs.*.gpus", "Array [1,4]"),
        ("jobs.*.NAME", "Array [\"a\",\"b\",\"c\"]"),
        ("jobs.*['name']", "Array [\"a\",\"b\",\"c\"]"),
        ("jobs.*.missing", "Array []"),
        ("jobs.*.name.deeper", "Array []"),
        (
            "github.event.issue.labels.*.name",
            "Array [\"bug\",\"Help\"]",
        ),
        ("nested.list.*[0]", "Array [1,3]"),
        ("nested.list.*.*", "Array [1,2,3,4]"),
        ("nested.*.y.z", "Array [\"deep\"]"),
        ("empty_arr.*", "Array []"),
        ("empty_obj.*", "Array []"),
        ("nothing.*", "Array []"),
        ("s.*", "Array []"),
        ("t.*", "Array []"),
        ("arr.*.k", "Array [\"v\"]"),
        ("arr.*[0]", "Array [3]"),
        ("obj['*']", "Null "),
        ("join(jobs.*.name, '+')", "String a+b+c"),
        ("contains(jobs.*.name, 'B')", "Boolean true"),
        ("contains(jobs.*.name, 'd')", "Boolean false"),
        ("toJSON(jobs.*.gpus)", "String [\n  1,\n  4\n]"),
        ("jobs.*.name[0]", "Array []"),
        ("(jobs.*.name)[0]", "Array []"),
        ("jobs.*.name == jobs.*.name", "Boolean false"),
    ]);
}

#[test]
fn not_and_truthiness() {
    check_table(&[
        ("!true", "Boolean false"),
        ("!false", "Boolean true"),
        ("!null", "Boolean true"),
        ("!0", "Boolean true"),
        ("!-0", "Boolean true"),
        ("!1", "Boolean false"),
        ("!-1", "Boolean false"),
        ("!NaN", "Boolean true"),
        ("!Infinity", "Boolean false"),
        ("!''", "Boolean true"),
        ("!'0'", "Boolean false"),
        ("!'false'", "Boolean false"),
        ("!' '", "Boolean false"),
        ("!empty_arr", "Boolean false"),
        ("!empty_obj", "Boolean false"),
        ("!!nums", "Boolean true"),
        ("!!''", "Boolean false"),
        ("!!!true", "Boolean false"),
        ("!env.EMPTY", "Boolean true"),
        ("!env.ZERO", "Boolean false"),
        ("!github.nope", "Boolean true"),
        ("! true", "Boolean false"),
        ("!(1 == 1)", "Boolean false"),
        ("!1 == 1", "Boolean false"),
        ("!0 == 1", "Boolean true"),
    ]);
}

#[test]
fn and_or_return_operands() {
    check_table(&[
        ("true && true", "Boolean true"),
        ("true && false", "Boolean false"),
        ("false && true", "Boolean false"),
        ("false || true", "Boolean true"),
        ("false || false", "Boolean false"),
        ("1 && 2", "Number 2"),
        ("0 && 2", "Number 0"),
        ("'a' && 'b'", "String b"),
        ("'' && 'b'", "String "),
        ("null && 'b'", "Null "),
        ("1 || 2", "Number 1"),
        ("0 || 2", "Number 2"),
        ("'' || 'fallback'", "String fallback"),
        ("null || null", "Null "),
        ("null || 0", "Number 0"),
        ("env.EMPTY || 'default'", "String default"),
        ("env.CI || 'default'", "String true"),
        ("github.nope || matrix.os", "String linux"),
        ("matrix.gpu > 1 && 'multi' || 'single'", "String multi"),
        ("matrix.gpu > 4 && 'multi' || 'single'", "String single"),
        ("1 && 2 && 3", "Number 3"),
        ("1 && 0 && 3", "Number 0"),
        ("0 || '' || null", "Null "),
        ("0 || '' || 'x' || 'y'", "String x"),
        ("nums && 'yes'", "String yes"),
        ("empty_arr || 'no'", "Array []"),
        ("NaN || 'nan is falsy'", "String nan is falsy"),
        ("false && fromJSON('not json')", "Boolean false"),
        ("true || fromJSON('not json')", "Boolean true"),
        ("true && fromJSON('not json')", "err evaluation"),
        ("true || false && false", "Boolean true"),
        ("(true || false) && false", "Boolean false"),
        ("false && false || true", "Boolean true"),
        ("false && (false || true)", "Boolean false"),
    ]);
}

#[test]
fn equality_and_coercion() {
    check_table(&[
        ("1 == 1", "Boolean true"),
        ("1 == 2", "Boolean false"),
        ("1 != 2", "Boolean true"),
        ("1 == 1.0", "Boolean true"),
        ("0 == -0", "Boolean true"),
        ("0.1 + 0.2", "err lexing"),
        ("NaN == NaN", "Boolean false"),
        ("NaN != NaN", "Boolean true"),
        ("Infinity == Infinity", "Boolean true"),
        ("null == null", "Boolean true"),
        ("null == 0", "Boolean true"),
        ("null == false", "Boolean true"),
        ("null == ''", "Boolean true"),
        ("null != 'x'", "Boolean true"),
        ("true == 1", "Boolean true"),
        ("true == 2", "Boolean false"),
        ("false == 0", "Boolean true"),
        ("true == 'true'", "Boolean false"),
        ("true == '1'", "Boolean true"),
        ("false == ''", "Boolean true"),
        ("false == 'false'", "Boolean false"),
        ("true == true", "Boolean true"),
        ("true != false", "Boolean true"),
        ("'1' == 1", "Boolean true"),
        ("' 1 ' == 1", "Boolean true"),
        ("'0x10' == 16", "Boolean true"),
        ("'1e2' == 100", "Boolean true"),
        ("'' == 0", "Boolean true"),
        ("'   ' == 0", "Boolean true"),
        ("'abc' == 0", "Boolean false"),
        ("'abc' != 0", "Boolean true"),
        ("'Infinity' == Infinity", "Boolean true"),
        ("'-Infinity' == -Infinity", "Boolean true"),
        ("'NaN' == NaN", "Boolean false"),
        ("'abc' == 'ABC'", "Boolean true"),
        ("'abc' != 'ABD'", "Boolean true"),
        ("'abc' == 'abc '", "Boolean false"),
        ("'1' == '1.0'", "Boolean false"),
        ("'straße' == 'STRASSE'", "Boolean false"),
        ("'é' == 'É'", "Boolean true"),
        ("'ǆ' == 'Ǆ'", "Boolean true"),
        ("'ı' == 'I'", "Boolean false"),
        ("'ı' == 'i'", "Boolean false"),
        ("'ſ' == 's'", "Boolean false"),
        ("'i' == 'İ'", "Boolean false"),
        ("'ΣΑΣ' == 'σας'", "Boolean true"),
        ("env.NUM == 42", "Boolean true"),
        ("env.HEX == 16", "Boolean true"),
        ("env.CI == true", "Boolean false"),
        ("env.CI == 'TRUE'", "Boolean true"),
        ("matrix.os == 'Linux'", "Boolean true"),
        ("github.nope == null", "Boolean true"),
        ("github.nope == ''", "Boolean true"),
        ("github.nope == 0", "Boolean true"),
        ("nums == nums", "Boolean true"),
        ("nums != nums", "Boolean false"),
        ("matrix.flags == matrix.flags", "Boolean true"),
        ("matrix.cfg == matrix['CFG']", "Boolean true"),
        ("empty_arr == empty_obj", "Boolean false"),
        ("fromJSON('[]') == fromJSON('[]')", "Boolean false"),
        ("fromJSON('{}') == fromJSON('{}')", "Boolean false"),
        ("nums == 'Array'", "Boolean false"),
        ("empty_obj == 'Object'", "Boolean false"),
        ("empty_arr == 0", "Boolean false"),
        ("empty_arr == null", "Boolean false"),
        ("empty_arr != null", "Boolean true"),
        ("empty_arr == false", "Boolean false"),
        ("1 == 1 == true", "Boolean true"),
        ("1 == 2 == false", "Boolean true"),
        ("2 == 2 == 2", "Boolean false"),
        ("1 != 1 != 1", "Boolean true"),
    ]);
}

#[test]
fn ordering_comparisons() {
    check_table(&[
        ("1 < 2", "Boolean true"),
        ("2 < 1", "Boolean false"),
        ("1 <= 1", "Boolean true"),
        ("1 >= 2", "Boolean false"),
        ("2 > 1", "Boolean true"),
        ("-1 < 0", "Boolean true"),
        ("1.5 > 1.25", "Boolean true"),
        ("-Infinity < -1e308", "Boolean true"),
        ("Infinity > 1e308", "Boolean true"),
        ("NaN < 1", "Boolean false"),
        ("NaN > 1", "Boolean false"),
        ("NaN <= NaN", "Boolean false"),
        ("NaN >= NaN", "Boolean false"),
        ("true > false", "Boolean true"),
        ("false < true", "Boolean true"),
        ("true >= true", "Boolean true"),
        ("null < 1", "Boolean true"),
        ("null <= null", "Boolean true"),
        ("null < null", "Boolean false"),
        ("null >= false", "Boolean true"),
        ("'a' < 'b'", "Boolean true"),
        ("'B' < 'a'", "Boolean false"),
        ("'a' < 'B'", "Boolean true"),
        ("'abc' < 'abd'", "Boolean true"),
        ("'abc' < 'ab'", "Boolean false"),
        ("'' < 'a'", "Boolean true"),
        ("'ABC' <= 'abc'", "Boolean true"),
        ("'abc' >= 'ABC'", "Boolean true"),
        ("'a' < '_'", "Boolean true"),
        ("'10' < '9'", "Boolean true"),
        ("'10' < 9", "Boolean false"),
        ("10 < '9'", "Boolean false"),
        ("'0x0a' > 9", "Boolean true"),
        ("'abc' < 1", "Boolean false"),
        ("'abc' > 1", "Boolean false"),
        ("'' < 1", "Boolean true"),
        ("true < 2", "Boolean true"),
        ("'1' > false", "Boolean true"),
        ("nums < 1", "Boolean false"),
        ("nums > 1", "Boolean false"),
        ("nums <= nums", "Boolean false"),
        ("empty_obj >= empty_obj", "Boolean false"),
        ("1 < 2 < 3", "Boolean true"),
        ("3 > 2 > 1", "Boolean false"),
        ("matrix.gpu >= 2", "Boolean true"),
        ("env.NUM > 40", "Boolean true"),
        ("env.NUM > '5'", "Boolean false"),
        ("'é' > 'z'", "Boolean true"),
        ("'Σ' == 'σ' && 'σ' < 'ω'", "Boolean true"),
    ]);
}

#[test]
fn precedence() {
    check_table(&[
        ("1 < 2 == true", "Boolean true"),
        ("true == 1 < 2", "Boolean true"),
        ("2 > 1 == 1 > 0", "Boolean true"),
        ("!false == true", "Boolean true"),
        ("!(false == true)", "Boolean true"),
        ("!1 < 2", "Boolean true"),
        ("1 == 1 && 2 == 2", "Boolean true"),
        ("1 == 2 || 2 == 2", "Boolean true"),
        ("'a' == 'a' && 'b'", "String b"),
        ("false || 1 == 1", "Boolean true"),
        ("true && false || 'x'", "String x"),
        ("true || false && 'x'", "Boolean true"),
        ("(1 == 1) == (2 == 2)", "Boolean true"),
        ("!nums.*[0]", "Boolean false"),
        ("!github.sha == false", "Boolean true"),
        ("fromJSON('[1]')[0] == 1", "Boolean true"),
        ("-1 < 0 && 0 < 1", "Boolean true"),
        ("1 < 2 && 2 < 3 || false", "Boolean true"),
    ]);
}

#[test]
fn string_functions() {
    check_table(&[
        ("contains('Hello', 'ell')", "Boolean true"),
        ("contains('Hello', 'ELL')", "Boolean true"),
        ("contains('Hello', 'xyz')", "Boolean false"),
        ("contains('Hello', '')", "Boolean true"),
        ("contains('', '')", "Boolean true"),
        ("contains('', 'a')", "Boolean false"),
        ("contains(12345, 34)", "Boolean true"),
        ("contains(true, 'ru')", "Boolean true"),
        ("contains(null, '')", "Boolean true"),
        ("contains('null', null)", "Boolean true"),
        ("contains(1.5, '.')", "Boolean true"),
        ("contains(empty_obj, 'Obj')", "Boolean true"),
        ("contains(nums, 2)", "Boolean true"),
        ("contains(nums, '2')", "Boolean true"),
        ("contains(nums, 4)", "Boolean false"),
        ("contains(words, 'foo')", "Boolean true"),
        ("contains(words, 'fo')", "Boolean false"),
        ("contains(arr, null)", "Boolean true"),
        ("contains(arr, true)", "Boolean true"),
        ("contains(arr, 'TWO')", "Boolean true"),
        ("contains(empty_arr, null)", "Boolean false"),
        (
            "contains(fromJSON('[[1]]'), fromJSON('[1]'))",
            "Boolean false",
        ),
        ("contains(matrix.flags, 'A')", "Boolean true"),
        ("contains(github.ref, 'heads')", "Boolean true"),
        ("contains(s, 'o w')", "Boolean true"),
        ("startsWith('Hello', 'he')", "Boolean true"),
        ("startsWith('Hello', 'lo')", "Boolean false"),
        ("startsWith('Hello', '')", "Boolean true"),
        ("startsWith('', 'a')", "Boolean false"),
        ("startsWith('He', 'Hello')", "Boolean false"),
        ("startsWith(123, 12)", "Boolean true"),
        ("startsWith(true, 'T')", "Boolean true"),
        ("startsWith(null, '')", "Boolean true"),
        ("startsWith(nums, 'arr')", "Boolean true"),
        ("startsWith(github.ref, 'refs/heads/')", "Boolean true"),
        ("startsWith('ǆemal', 'Ǆ')", "Boolean true"),
        ("startsWith('ıx', 'I')", "Boolean false"),
        ("endsWith('Hello', 'LLO')", "Boolean true"),
        ("endsWith('Hello', 'He')", "Boolean false"),
        ("endsWith('Hello', '')", "Boolean true"),
        ("endsWith('lo', 'Hello')", "Boolean false"),
        ("endsWith(1.5, 5)", "Boolean true"),
        ("endsWith(false, 'SE')", "Boolean true"),
        ("endsWith(empty_obj, 'ject')", "Boolean true"),
        ("endsWith(github.ref, '/main')", "Boolean true"),
        ("endsWith('straße', 'SSE')", "Boolean false"),
        ("CONTAINS('abc', 'B')", "Boolean true"),
        ("StartsWith('abc', 'A')", "Boolean true"),
        ("ENDSWITH('abc', 'C')", "Boolean true"),
    ]);
}

#[test]
fn format_function() {
    check_table(&[
        ("format('plain')", "String plain"),
        ("format('{0}', 'a')", "String a"),
        ("format('{0} {1}', 'a', 'b')", "String a b"),
        ("format('{1}{0}', 'a', 'b')", "String ba"),
        ("format('{0}{0}', 'x')", "String xx"),
        ("format('{0}', 1)", "String 1"),
        ("format('{0}', 1.50)", "String 1.5"),
        ("format('{0}', -0)", "String 0"),
        ("format('{0}', 1e21)", "String 1000000000000000000000"),
        ("format('{0}', NaN)", "String NaN"),
        ("format('{0}', -Infinity)", "String -Infinity"),
        ("format('{0}', true)", "String true"),
        ("format('{0}', null)", "String "),
        ("format('{0}', nums)", "String Array"),
        ("format('{0}', empty_obj)", "String Object"),
        ("format('{{0}}', 'x')", "String {0}"),
        ("format('{{{0}}}', 'x')", "String {x}"),
        ("format('}}{{')", "String }{"),
        ("format('{0}-{1}-{2}', 1, 2, 3)", "String 1-2-3"),
        ("format('{00}', 'x')", "String x"),
        ("format('{0}', 'a', 'unused')", "String a"),
        ("format(123)", "String 123"),
        ("format('{0}')", "err evaluation"),
        ("format('{1}', 'a')", "err evaluation"),
        ("format('{', 'a')", "err evaluation"),
        ("format('}', 'a')", "err evaluation"),
        ("format('{0', 'a')", "err evaluation"),
        ("format('{x}', 'a')", "err evaluation"),
        ("format('{-1}', 'a')", "err evaluation"),
        ("format('{ 0}', 'a')", "err evaluation"),
        ("format('{}', 'a')", "err evaluation"),
        ("format('a}b', 'a')", "err evaluation"),
        (
            "format('Hello {0}, you are on {1}', github.actor, matrix.os)",
            "String Hello Mona, you are on linux",
        ),
        ("FORMAT('{0}', 'case')", "String case"),
    ]);
}

#[test]
fn join_function() {
    check_table(&[
        ("join(words)", "String Foo,bar,BAZ"),
        ("join(words, ', ')", "String Foo, bar, BAZ"),
        ("join(words, '')", "String FoobarBAZ"),
        ("join(nums, '+')", "String 1+2+3"),
        ("join(arr, '|')", "String 1|two||true|Object|Array"),
        ("join(empty_arr)", "String "),
        ("join(empty_obj)", "String "),
        ("join(obj)", "String "),
        ("join('abc')", "String abc"),
        ("join('abc', '-')", "String abc"),
        ("join(12)", "String 12"),
        ("join(null)", "String "),
        ("join(true)", "String true"),
        ("join(nums, null)", "String 123"),
        ("join(nums, 0)", "String 10203"),
        ("join(nums, true)", "String 1true2true3"),
        ("join(nums, nums)", "String 1,2,3"),
        ("join(nums, empty_obj)", "String 1,2,3"),
        ("join(jobs.*.name)", "String a,b,c"),
    ]);
}

#[test]
fn json_functions() {
    check_table(&[
        ("toJSON(null)", "String null"),
        ("toJSON(true)", "String true"),
        ("toJSON(1)", "String 1"),
        ("toJSON(-0)", "String 0"),
        ("toJSON(1.5)", "String 1.5"),
        ("toJSON(1e21)", "String 1000000000000000000000"),
        ("toJSON('a')", "String \"a\""),
        ("toJSON('q''\"\\')", "String \"q'\\\"\\\\\""),
        ("toJSON(empty_arr)", "String []"),
        ("toJSON(empty_obj)", "String {}"),
        ("toJSON(nums)", "String [\n  1,\n  2,\n  3\n]"),
        ("toJSON(matrix.cfg)", "String {\n  \"Fast\": true\n}"),
        (
            "toJSON(obj.b)",
            "String {\n  \"c\": [\n    10,\n    20\n  ]\n}",
        ),
        (
            "toJSON(fromJSON('{\"b\": 1, \"a\": 2}'))",
            "String {\n  \"b\": 1,\n  \"a\": 2\n}",
        ),
        ("toJSON('line\nbreak')", "String \"line\\nbreak\""),
        ("tojson(1)", "String 1"),
        ("fromJSON('1')", "Number 1"),
        ("fromJSON('1.5e2')", "Number 150"),
        ("fromJSON('-0')", "Number 0"),
        ("fromJSON('true')", "Boolean true"),
        ("fromJSON('null')", "Null "),
        ("fromJSON('\"s\"')", "String s"),
        ("fromJSON(' [1, \"a\"] ')", "Array [1,\"a\"]"),
        (
            "fromJSON('{\"a\": {\"b\": null}}')",
            "Object {\"a\":{\"b\":null}}",
        ),
        ("fromJSON('{\"a\": 1}').A", "Number 1"),
        ("fromJSON(1)", "Number 1"),
        ("fromJSON(true)", "Boolean true"),
        ("fromJSON(env.NUM)", "Number 42"),
        ("fromJSON(toJSON(nums))", "Array [1,2,3]"),
        ("fromJSON(toJSON(obj)).b.c[0]", "Number 10"),
        ("fromJSON('')", "err evaluation"),
        ("fromJSON('{')", "err evaluation"),
        ("fromJSON('[1,]')", "err evaluation"),
        ("fromJSON('NaN')", "err evaluation"),
        ("fromJSON('abc')", "err evaluation"),
        ("fromJSON(null)", "err evaluation"),
        ("fromJSON('1 2')", "err evaluation"),
        ("fromjson('[]')", "Array []"),
    ]);
}

#[test]
fn case_function() {
    check_table(&[
        ("case(true, 'a', 'b')", "String a"),
        ("case(false, 'a', 'b')", "String b"),
        ("case(false, 'a', true, 'b', 'c')", "String b"),
        ("case(false, 'a', false, 'b', 'c')", "String c"),
        ("case(true, 'a', true, 'b', 'c')", "String a"),
        ("case(matrix.os == 'linux', 'apt', 'brew')", "String apt"),
        (
            "case(matrix.gpu > 2, 'big', matrix.gpu > 1, 'medium', 'small')",
            "String medium",
        ),
        ("case(true, nums, null)", "Array [1,2,3]"),
        ("case(false, 1, null)", "Null "),
        ("case(true, 1, fromJSON('bad'))", "Number 1"),
        ("case(true, 1, false, fromJSON('bad'), 2)", "Number 1"),
        ("case(false, fromJSON('bad'), 2)", "Number 2"),
        ("case(1, 'a', 'b')", "err evaluation"),
        ("case('true', 'a', 'b')", "err evaluation"),
        ("case(null, 'a', 'b')", "err evaluation"),
        ("case(nums, 'a', 'b')", "err evaluation"),
        ("case(false, 'a', 0, 'b', 'c')", "err evaluation"),
        ("case(true, 'a', 0, 'b', 'c')", "String a"),
        ("case(!nums, 'a', 'b')", "String b"),
        ("CASE(true, 1, 2)", "Number 1"),
    ]);
}

#[test]
fn status_functions_follow_the_job_status() {
    let table = [
        ("success()", ["true", "false", "false"]),
        ("failure()", ["false", "true", "false"]),
        ("cancelled()", ["false", "false", "true"]),
        ("always()", ["true", "true", "true"]),
        ("!cancelled()", ["true", "true", "false"]),
        ("success() || failure()", ["true", "true", "false"]),
        ("SUCCESS()", ["true", "false", "false"]),
    ];
    let statuses = [JobStatus::Success, JobStatus::Failure, JobStatus::Cancelled];
    for (src, wants) in table {
        for (status, want) in statuses.iter().zip(wants) {
            let got = outcome(src, &ctx().with_status(*status));
            assert_eq!(got, format!("Boolean {want}"), "{src} with {status:?}");
        }
    }
}

#[test]
fn memory_limit_stops_runaway_strings() {
    // Strings count two bytes per character, as in .NET, against a 1 MiB budget.
    let json_len = outcome("toJSON(github)", &ctx()).len() - "String ".len();
    let repeats = 200_000 / json_len;
    let big = format!("format('{}', toJSON(github))", "{0}".repeat(repeats));
    let got = outcome(&big, &ctx());
    assert_eq!(got.len(), "String ".len() + json_len * repeats);
    let twice = format!("format('{{0}}{{0}}{{0}}', {big})");
    assert_eq!(outcome(&twice, &ctx()), "err evaluation");
}

#[test]
fn depth_limit_is_fifty_levels() {
    let bangs = |n: usize| format!("{}true", "!".repeat(n));
    assert_eq!(outcome(&bangs(49), &ctx()), "Boolean false");
    assert_eq!(outcome(&bangs(50), &ctx()), "err parsing");
    let calls = |n: usize| format!("{}1{}", "join(".repeat(n), ")".repeat(n));
    assert_eq!(outcome(&calls(49), &ctx()), "String 1");
    assert_eq!(outcome(&calls(50), &ctx()), "err parsing");
    let index = |n: usize| format!("nums{}", "[0]".repeat(n));
    assert_eq!(outcome(&index(49), &ctx()), "Null ");
    assert_eq!(outcome(&index(50), &ctx()), "err parsing");
    let long_or: Vec<String> = (0..500).map(|i| i.to_string()).collect();
    assert_eq!(outcome(&long_or.join(" || "), &ctx()), "Number 1");
    assert_eq!(outcome(&long_or.join(" && "), &ctx()), "Number 0");
}

/// An expression, its error kind, span, words the message contains, and hint.
type ErrorCase<'a> = (&'a str, ErrorKind, Range<usize>, &'a str, Option<&'a str>);

#[test]
fn errors_point_at_the_exact_place() {
    let cases: &[ErrorCase<'_>] = &[
        (
            "1 = 2",
            ErrorKind::Lex,
            2..3,
            "unexpected `=`",
            Some("did you mean `==`?"),
        ),
        (
            "a && b & c",
            ErrorKind::Lex,
            7..8,
            "unexpected `&`",
            Some("did you mean `&&`?"),
        ),
        (
            "x || 'oops",
            ErrorKind::Lex,
            5..10,
            "unterminated string",
            None,
        ),
        (
            "0x1Z + 1",
            ErrorKind::Lex,
            0..4,
            "invalid number `0x1Z`",
            None,
        ),
        (
            "\"quoted\"",
            ErrorKind::Lex,
            0..8,
            "unexpected",
            Some("strings use single quotes: `'text'`"),
        ),
        (
            "1 <",
            ErrorKind::Parse,
            3..3,
            "unexpected end of expression",
            None,
        ),
        ("1 < )", ErrorKind::Parse, 4..5, "unexpected `)`", None),
        ("(1 == 2", ErrorKind::Parse, 7..7, "expected `)`", None),
        (
            "github.sha 1",
            ErrorKind::Parse,
            11..12,
            "unexpected `1`",
            None,
        ),
        ("a[1 2]", ErrorKind::Parse, 4..5, "unexpected `2`", None),
        (
            "format('{0}' 'x')",
            ErrorKind::Parse,
            13..16,
            "unexpected `'x'`",
            None,
        ),
        (
            "x == startwith(a, 'b')",
            ErrorKind::Parse,
            5..14,
            "unknown function `startwith`",
            Some("did you mean `startsWith`?"),
        ),
        (
            "toJosn(x)",
            ErrorKind::Parse,
            0..6,
            "unknown function `toJosn`",
            Some("did you mean `toJSON`?"),
        ),
        (
            "1 && contains('a')",
            ErrorKind::Parse,
            5..18,
            "`contains` takes 2 arguments, but 1 was given",
            None,
        ),
        (
            "success(1)",
            ErrorKind::Parse,
            0..10,
            "takes no arguments",
            None,
        ),
        (
            "format('{1}', 'a')",
            ErrorKind::Evaluation,
            7..12,
            "invalid format string",
            None,
        ),
        (
            "true && fromJSON('{')",
            ErrorKind::Evaluation,
            17..20,
            "could not parse",
            None,
        ),
        (
            "case(1, 'a', 'b')",
            ErrorKind::Evaluation,
            5..6,
            "must be a boolean",
            None,
        ),
    ];
    for (src, kind, span, words, hint) in cases {
        let err = parse(src)
            .and_then(|e| evaluate(&e, &ctx()))
            .expect_err(src);
        assert_eq!(err.kind, *kind, "{src}: {}", err.message);
        assert_eq!(err.span, *span, "{src}: {}", err.message);
        assert!(err.message.contains(words), "{src}: {}", err.message);
        if let Some(hint) = hint {
            assert_eq!(err.hint.as_deref(), Some(*hint), "{src}");
        }
        assert!(
            err.message
                .chars()
                .next()
                .is_some_and(|c| !c.is_uppercase()),
            "messages start lower-case: {}",
            err.message
        );
    }
}

#[test]
fn restricted_contexts_reject_unknown_names() {
    let known = ["github", "matrix"];
    let err = expr::parse_with_contexts("matrx.os == 'linux'", &known).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Parse);
    assert_eq!(err.span, 0..5);
    assert_eq!(err.hint.as_deref(), Some("did you mean `matrix`?"));
    assert!(expr::parse_with_contexts("Matrix.os && GITHUB.sha", &known).is_ok());
    // Property names are not contexts.
    assert!(expr::parse_with_contexts("github.matrx", &known).is_ok());
}

/// An expression and the static accesses it makes: (path, span).
type AccessCase<'a> = (&'a str, &'a [(&'a [&'a str], Range<usize>)]);

#[test]
fn context_accesses_list_static_paths() {
    let cases: &[AccessCase<'_>] = &[
        (
            "steps.build.outputs.x",
            &[(&["steps", "build", "outputs", "x"], 0..21)],
        ),
        (
            "steps['build'].outcome",
            &[(&["steps", "build", "outcome"], 0..22)],
        ),
        (
            "matrix.os == 'linux' && env.CI",
            &[(&["matrix", "os"], 0..9), (&["env", "CI"], 24..30)],
        ),
        (
            "steps[matrix.id].outputs",
            &[(&["steps"], 0..5), (&["matrix", "id"], 6..15)],
        ),
        ("needs.*.result", &[(&["needs"], 0..5)]),
        (
            "format('{0}', inputs.name)",
            &[(&["inputs", "name"], 14..25)],
        ),
        ("fromJSON(x).y", &[(&["x"], 9..10)]),
        ("1 == 1", &[]),
        ("github[0].x", &[(&["github"], 0..6)]),
    ];
    for (src, want) in cases {
        let got: Vec<(Vec<String>, Range<usize>)> = parse(src)
            .unwrap()
            .context_accesses()
            .into_iter()
            .map(|a| (a.path, a.span))
            .collect();
        let want: Vec<(Vec<String>, Range<usize>)> = want
            .iter()
            .map(|(p, s)| (p.iter().map(ToString::to_string).collect(), s.clone()))
            .collect();
        assert_eq!(got, want, "{src}");
    }
}

#[test]
fn status_function_calls_are_detected() {
    for (src, want) in [
        ("success()", true),
        ("always() && x", true),
        ("!cancelled()", true),
        ("format('{0}', failure())", true),
        ("x == 'success()'", false),
        ("github.success", false),
        ("true", false),
    ] {
        assert_eq!(parse(src).unwrap().calls_status_function(), want, "{src}");
    }
}

#[test]
fn templates_split_literals_and_expressions() {
    let t = parse_template("run ${{ matrix.os }} on ${{ matrix.gpu }} gpus").unwrap();
    let spans: Vec<Range<usize>> = t.expressions().map(|(_, s)| s).collect();
    assert_eq!(spans, vec![8..17, 28..38]);
    assert!(!t.is_literal());
    assert_eq!(
        t.evaluate(&ctx()).unwrap(),
        Value::String("run linux on 2 gpus".into())
    );

    let literal = parse_template("no expressions, just $ and {{ }}").unwrap();
    assert!(literal.is_literal());
    assert_eq!(
        literal.evaluate(&ctx()).unwrap(),
        Value::String("no expressions, just $ and {{ }}".into())
    );
    assert_eq!(
        parse_template("").unwrap().evaluate(&ctx()).unwrap(),
        Value::String(String::new())
    );
}

#[test]
fn a_lone_expression_keeps_its_type() {
    let typed = |s: &str| parse_template(s).unwrap().evaluate(&ctx()).unwrap();
    assert_eq!(typed("${{ matrix.gpu }}"), Value::Number(2.0));
    assert_eq!(
        typed("${{ fromJSON('[1]') }}"),
        Value::Array(vec![Value::Number(1.0)])
    );
    assert_eq!(typed("${{ true }}"), Value::Bool(true));
    assert_eq!(typed(" ${{ true }}"), Value::String(" true".into()));
    assert_eq!(typed("${{ 1 }}${{ 2 }}"), Value::String("12".into()));
    assert_eq!(typed("${{ nums }}!"), Value::String("Array!".into()));
    assert_eq!(typed("${{ null }}"), Value::Null);
    assert_eq!(typed("x${{ null }}y"), Value::String("xy".into()));
}

#[test]
fn template_expression_may_contain_braces_in_strings() {
    let t = parse_template("${{ format('{{0}}}}', 1) }} done").unwrap();
    assert_eq!(
        t.evaluate(&ctx()).unwrap(),
        Value::String("{0}} done".into())
    );
}

#[test]
fn template_errors_are_relative_to_the_whole_string() {
    let err = parse_template("echo ${{ matrix.os").unwrap_err();
    assert_eq!((err.kind, err.span.clone()), (ErrorKind::Parse, 5..8));
    assert!(err.message.contains("unclosed"));

    let err = parse_template("a ${{ 1 = 2 }}").unwrap_err();
    assert_eq!((err.kind, err.span), (ErrorKind::Lex, 8..9));

    let err = parse_template("a ${{ nope() }}").unwrap_err();
    assert_eq!(err.span, 6..10);

    let err = parse_template("x ${{   }}").unwrap_err();
    assert!(err.message.contains("empty"));

    let t = parse_template("ok ${{ format('{9}') }}").unwrap();
    let err = t.evaluate(&ctx()).unwrap_err();
    assert_eq!((err.kind, err.span), (ErrorKind::Evaluation, 14..19));
}

#[test]
fn conditions_imply_success_without_a_status_function() {
    let failing = ctx().with_status(JobStatus::Failure);
    let cases = [
        ("true", true, false),
        ("${{ true }}", true, false),
        ("  ${{ matrix.os == 'linux' }}  ", true, false),
        ("matrix.os == 'linux'", true, false),
        ("matrix.os == 'mac'", false, false),
        ("always()", true, true),
        ("${{ failure() }}", false, true),
        ("failure() && matrix.gpu > 1", false, true),
        ("success() || failure()", true, true),
        ("env.EMPTY", false, false),
        ("'false'", true, false),
        ("", false, false),
    ];
    for (src, on_success, on_failure) in cases {
        let cond = parse_condition(src).unwrap();
        assert_eq!(
            cond.evaluate(&ctx()).unwrap(),
            on_success,
            "{src} on success"
        );
        assert_eq!(
            cond.evaluate(&failing).unwrap(),
            on_failure,
            "{src} on failure"
        );
    }
    let err = parse_condition("  x = 1").unwrap_err();
    assert_eq!(err.span, 4..5);
    let err = parse_condition("${{ x = 1 }}").unwrap_err();
    assert_eq!(err.span, 6..7);
    let err = parse_condition("${{ a }} && ${{ b }}").unwrap_err();
    assert_eq!(err.span, 0..3);
    assert!(err.hint.unwrap().contains("one `${{ }}`"));
}

#[test]
fn hash_files_hashes_matched_files_in_path_order() {
    use sha2::{Digest, Sha256};
    let dir = std::env::temp_dir().join(format!("gpuflow-hashfiles-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("sub/deeper")).unwrap();
    std::fs::write(dir.join("a.lock"), "A").unwrap();
    std::fs::write(dir.join("sub/b.lock"), "B").unwrap();
    std::fs::write(dir.join("sub/deeper/c.lock"), "C").unwrap();
    std::fs::write(dir.join("sub/readme.md"), "R").unwrap();
    let ctx = ctx().with_workspace(&dir);
    let expected = |contents: &[&str]| -> String {
        let mut total = Sha256::new();
        for c in contents {
            total.update(Sha256::digest(c.as_bytes()));
        }
        total
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    let cases: &[(&str, &[&str])] = &[
        ("hashFiles('**/*.lock')", &["A", "B", "C"]),
        ("hashFiles('*.lock')", &["A"]),
        ("hashFiles('sub/*.lock')", &["B"]),
        ("hashFiles('**/*.lock', '!sub/deeper/**')", &["A", "B"]),
        ("hashFiles('sub')", &["B", "C", "R"]),
        ("hashFiles('a.lock', 'sub/readme.md')", &["A", "R"]),
        ("hashFiles('./a.lock')", &["A"]),
        ("hashFiles('*')", &["A", "B", "C", "R"]),
        ("hashFiles('*', '!sub')", &["A"]),
    ];
    for (src, contents) in cases {
        assert_eq!(
            outcome(src, &ctx),
            format!("String {}", expected(contents)),
            "{src}"
        );
    }
    assert_eq!(outcome("hashFiles('*.nothing')", &ctx), "String ");
    assert_eq!(outcome("hashFiles('[')", &ctx), "err evaluation");
    assert_eq!(outcome("hashFiles('*')", &self::ctx()), "err evaluation");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn values_convert_to_and_from_json() {
    let j = json!({"a": [1, 2.5, "x", null, true, {}], "B": {"c": -3}});
    let v = Value::from_json(j.clone());
    assert_eq!(v.to_json(), j);
    assert_eq!(Value::Number(f64::NAN).to_json(), serde_json::Value::Null);
    for (v, kind, truthy, string) in [
        (Value::Null, "Null", false, ""),
        (Value::Bool(false), "Boolean", false, "false"),
        (Value::Number(-0.0), "Number", false, "0"),
        (Value::Number(2.5), "Number", true, "2.5"),
        (Value::String(String::new()), "String", false, ""),
        (Value::String("0".into()), "String", true, "0"),
        (Value::Array(vec![]), "Array", true, "Array"),
        (Value::Object(Default::default()), "Object", true, "Object"),
    ] {
        assert_eq!(v.kind(), kind);
        assert_eq!(v.is_truthy(), truthy, "{v:?}");
        assert_eq!(v.to_expr_string(), string);
    }
}

// ---- gpuflow eval ----

/// `gpuflow eval ARGS`: (exit code, -1 for a signal; stdout; stderr).
fn eval<I, S>(args: I) -> (i32, String, String)
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let out = gpuflow().arg("eval").args(args).output();
    (out.code().unwrap_or(-1), out.stdout, out.stderr)
}

#[test]
fn eval_json_prints_kind_and_value() {
    let cases = [
        (
            "1 + 1 == 2",
            1,
            "{\"err\": {\"kind\": \"lexing\", \"value\": \"`+` is not an operator: expressions have no arithmetic\"}}",
        ),
        (
            "format('{0}-{1}', m.os, 2)",
            0,
            "{\"kind\": \"String\", \"value\": \"linux-2\"}",
        ),
        (
            "m",
            0,
            "{\"kind\": \"Object\", \"value\": {\"os\": \"linux\"}}",
        ),
        // JSON has no NaN: the text GitHub prints for it, as a JSON string.
        ("NaN", 0, "{\"kind\": \"Number\", \"value\": \"NaN\"}"),
        (
            "-Infinity",
            0,
            "{\"kind\": \"Number\", \"value\": \"-Infinity\"}",
        ),
        (
            "fromJSON('[1, 2.5]')",
            0,
            "{\"kind\": \"Array\", \"value\": [1, 2.5]}",
        ),
        ("null", 0, "{\"kind\": \"Null\", \"value\": null}"),
        (
            "nope.x",
            1,
            "{\"err\": {\"kind\": \"parsing\", \"value\": \"unknown context `nope`\"}}",
        ),
        ("fromJSON('{')", 1, "{\"err\": {\"kind\": \"evaluation\""),
        (
            "success() && !failure()",
            0,
            "{\"kind\": \"Boolean\", \"value\": true}",
        ),
    ];
    for (src, code, want) in cases {
        let (got_code, out, _) = eval(["--json", "--context", "m={\"os\": \"linux\"}", "--", src]);
        assert_eq!(got_code, code, "{src}: {out}");
        assert!(out.starts_with(want), "{src}: {out}");
        assert_eq!(out.lines().count(), 1, "{src}: one line: {out}");
    }
}

#[test]
fn eval_status_flag_feeds_status_functions() {
    let (code, out, _) = eval(["--status", "failure", "--", "failure()"]);
    assert_eq!((code, out.as_str()), (0, "true\n"));
    let (_, out, _) = eval(["--status", "cancelled", "--", "success()"]);
    assert_eq!(out, "false\n");
}

#[test]
fn eval_for_people_prints_strings_raw_and_values_as_json() {
    let (code, out, _) = eval(["--", "'it''s'"]);
    assert_eq!((code, out.as_str()), (0, "it's\n"));
    let (_, out, _) = eval(["--", "fromJSON('{\"a\": [1]}')"]);
    assert_eq!(out, "{\n  \"a\": [\n    1\n  ]\n}\n");
    let (_, out, _) = eval(["--", "-1.50"]);
    assert_eq!(out, "-1.5\n");
}

#[test]
fn eval_errors_render_with_a_caret() {
    let (code, out, err) = eval(["--color", "never", "--", "1 == startwith('a', 'b')"]);
    assert_eq!(code, 1);
    assert!(out.is_empty());
    assert!(err.contains("error: unknown function `startwith`"), "{err}");
    assert!(err.contains("<expression>:1:6"), "{err}");
    assert!(err.contains("^^^^^^^^^"), "{err}");
    assert!(err.contains("help: did you mean `startsWith`?"), "{err}");

    let (_, _, err) = eval(["--color", "never", "--", "github.sha"]);
    assert!(err.contains("unknown context `github`"), "{err}");
    assert!(err.contains("--context NAME=JSON"), "{err}");
}

#[test]
fn eval_says_expressions_have_no_arithmetic() {
    for (src, op, col) in [("0.1 + 0.2", "+", 5), ("2 * 3", "*", 3), ("5 -1", "-", 3)] {
        let (code, out, err) = eval(["--color", "never", "--", src]);
        assert_eq!(code, 1, "{src}: {err}");
        assert!(out.is_empty(), "{src}: {out}");
        assert!(
            err.contains(&format!(
                "error: `{op}` is not an operator: expressions have no arithmetic"
            )),
            "{src}: {err}"
        );
        assert!(
            err.contains(&format!("<expression>:1:{col}")),
            "{src}: {err}"
        );
        assert!(err.contains("in a `run:` step"), "{src}: {err}");
        assert!(!err.contains("invalid number"), "{src}: {err}");
    }
}

#[test]
fn eval_rejects_bad_context_values_as_usage_errors() {
    for bad in ["github", "github={", "1x=1"] {
        let (code, _, err) = eval(["--context", bad, "--", "1"]);
        assert_eq!(code, 2, "{bad}: {err}");
        assert!(err.contains("--context"), "{bad}: {err}");
    }
}

#[test]
fn eval_hash_files_uses_the_workspace() {
    let dir = std::env::temp_dir().join(format!("gpuflow-eval-ws-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("f.txt"), "x").unwrap();
    let (code, out, _) = eval([
        "--workspace",
        dir.to_str().unwrap(),
        "--",
        "hashFiles('*.txt')",
    ]);
    assert_eq!(code, 0);
    assert_eq!(out.trim().len(), 64, "{out}");
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---- never panic ----

fn expr_strategy() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("null".to_string()),
        Just("true".to_string()),
        Just("NaN".to_string()),
        Just("-Infinity".to_string()),
        any::<i32>().prop_map(|n| n.to_string()),
        any::<f64>().prop_map(|n| format!("{n:e}")),
        "[a-z{}0-9 '_]{0,6}".prop_map(|s| format!("'{}'", s.replace('\'', "''"))),
        prop_oneof![
            Just("github"),
            Just("matrix.flags"),
            Just("jobs.*.name"),
            Just("obj"),
            Just("nums[1]"),
            Just("nothing"),
            Just("arr.*")
        ]
        .prop_map(str::to_string),
    ];
    leaf.prop_recursive(6, 64, 4, |inner| {
        let bin_ops = prop_oneof![
            Just("=="),
            Just("!="),
            Just("<"),
            Just("<="),
            Just(">"),
            Just(">="),
            Just("&&"),
            Just("||")
        ];
        let funcs = prop_oneof![
            Just("contains"),
            Just("startsWith"),
            Just("endsWith"),
            Just("format"),
            Just("join"),
            Just("toJSON"),
            Just("fromJSON"),
            Just("case")
        ];
        prop_oneof![
            (inner.clone(), bin_ops, inner.clone()).prop_map(|(a, op, b)| format!("{a} {op} {b}")),
            inner.clone().prop_map(|a| format!("!({a})")),
            inner.clone().prop_map(|a| format!("({a})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a})[{b}]")),
            inner.clone().prop_map(|a| format!("({a}).*")),
            (funcs, prop::collection::vec(inner, 1..4))
                .prop_map(|(f, args)| format!("{f}({})", args.join(", "))),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn arbitrary_text_never_panics(s in "\\PC{0,60}") {
        let c = ctx();
        if let Ok(e) = parse(&s) {
            let _ = evaluate(&e, &c);
        }
        if let Ok(t) = parse_template(&s) {
            let _ = t.evaluate(&c);
        }
        if let Ok(cond) = parse_condition(&s) {
            let _ = cond.evaluate(&c);
        }
    }

    #[test]
    fn expression_like_text_never_panics(s in "[a-z0-9 .,'()\\[\\]*!=<>&|{}$-]{0,60}") {
        let c = ctx();
        if let Ok(e) = parse(&s) {
            let _ = evaluate(&e, &c);
        }
        let _ = parse_template(&s).map(|t| t.evaluate(&c));
    }

    #[test]
    fn well_formed_expressions_parse_and_evaluate(src in expr_strategy()) {
        let e = parse(&src);
        // Arity is random (e.g. `contains(x)`), so a parse error is allowed; a panic is not,
        // and every error span lies inside the source.
        match e {
            Ok(e) => {
                if let Err(err) = evaluate(&e, &ctx()) {
                    prop_assert!(err.span.end <= src.len());
                }
                for access in e.context_accesses() {
                    prop_assert!(access.span.end <= src.len());
                }
            }
            Err(err) => prop_assert!(err.span.end <= src.len(), "{:?}", err),
        }
    }
}

#[test]
fn rendered_eval_errors() {
    let cases = [
        "1 == startwith('a', 'b')",
        "matrix.os = 'linux'",
        "contains('a') && x",
        "format('{1}', 'only one')",
        "'unterminated",
        "case(1, 'a', 'b')",
        "(1 == 2",
        "gihub.sha",
    ];
    let mut all = String::new();
    for src in cases {
        let (code, _, err) = eval([
            "--color",
            "never",
            "--context",
            "github={}",
            "--context",
            "matrix={}",
            "--context",
            "x=1",
            "--",
            src,
        ]);
        assert_eq!(code, 1, "{src}");
        all.push_str(&format!("$ gpuflow eval -- {src}\n{err}\n"));
    }
    insta::assert_snapshot!(all);
}
