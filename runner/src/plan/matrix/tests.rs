//! The expansion against GitHub's documented examples, and its invariants.

use indexmap::IndexMap;
use serde_json::Value;

use super::matching::{filter_matches, loose_eq};
use super::*;
use proptest::prelude::*;
use serde_json::json;
use test_case::test_case;

/// Builds an input from JSON written the way the YAML would be.
fn input(v: Value) -> MatrixInput {
    let mut m = MatrixInput::default();
    for (k, v) in v.as_object().unwrap() {
        let list = |v: &Value| -> Vec<IndexMap<String, Value>> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|e| e.as_object().unwrap().clone().into_iter().collect())
                .collect()
        };
        match k.as_str() {
            "include" => m.include = list(v),
            "exclude" => m.exclude = list(v),
            _ => {
                m.dimensions
                    .insert(k.clone(), v.as_array().unwrap().clone());
            }
        }
    }
    m
}

fn cells(v: Value) -> Vec<Value> {
    expand(&input(v))
        .unwrap()
        .into_iter()
        .map(|c| Value::Object(c.values.into_iter().collect()))
        .collect()
}

fn names(job: &str, v: Value) -> Vec<String> {
    expand(&input(v))
        .unwrap()
        .iter()
        .map(|c| c.display_name(job))
        .collect()
}

fn errors(v: Value) -> Vec<MatrixError> {
    expand(&input(v)).unwrap_err()
}

// docs.github.com, "Running variations of jobs in a workflow": the order of the variables
// determines the order the jobs are created in.
#[test]
fn product_in_written_order_first_dimension_slowest() {
    assert_eq!(
        cells(json!({"version": [10, 12, 14], "os": ["ubuntu-latest", "windows-latest"]})),
        vec![
            json!({"version": 10, "os": "ubuntu-latest"}),
            json!({"version": 10, "os": "windows-latest"}),
            json!({"version": 12, "os": "ubuntu-latest"}),
            json!({"version": 12, "os": "windows-latest"}),
            json!({"version": 14, "os": "ubuntu-latest"}),
            json!({"version": 14, "os": "windows-latest"}),
        ]
    );
}

// The documented include example (fruit/animal): six jobs, in this order.
#[test]
fn documented_include_example() {
    let got = cells(json!({
        "fruit": ["apple", "pear"],
        "animal": ["cat", "dog"],
        "include": [
            {"color": "green"},
            {"color": "pink", "animal": "cat"},
            {"fruit": "apple", "shape": "circle"},
            {"fruit": "banana"},
            {"fruit": "banana", "animal": "cat"},
        ]
    }));
    assert_eq!(
        got,
        vec![
            json!({"fruit": "apple", "animal": "cat", "color": "pink", "shape": "circle"}),
            json!({"fruit": "apple", "animal": "dog", "color": "green", "shape": "circle"}),
            json!({"fruit": "pear", "animal": "cat", "color": "pink"}),
            json!({"fruit": "pear", "animal": "dog", "color": "green"}),
            json!({"fruit": "banana"}),
            json!({"fruit": "banana", "animal": "cat"}),
        ]
    );
}

// "Example: Expanding configurations": four jobs, npm added to windows/16 only.
#[test]
fn documented_expanding_configurations() {
    let got = cells(json!({
        "os": ["windows-latest", "ubuntu-latest"],
        "node": [14, 16],
        "include": [{"os": "windows-latest", "node": 16, "npm": 6}]
    }));
    assert_eq!(got.len(), 4);
    assert_eq!(
        got[1],
        json!({"os": "windows-latest", "node": 16, "npm": 6})
    );
    assert_eq!(got.iter().filter(|c| c.get("npm").is_some()).count(), 1);
}

// "Example: Adding configurations": ten jobs, the last one windows/17.
#[test]
fn documented_adding_configurations() {
    let got = cells(json!({
        "os": ["macos-latest", "windows-latest", "ubuntu-latest"],
        "version": [12, 14, 16],
        "include": [{"os": "windows-latest", "version": 17}]
    }));
    assert_eq!(got.len(), 10);
    assert_eq!(got[9], json!({"os": "windows-latest", "version": 17}));
}

// Include-only matrix: one job per entry.
#[test]
fn documented_include_only() {
    let got = cells(json!({
        "include": [
            {"site": "production", "datacenter": "site-a"},
            {"site": "staging", "datacenter": "site-b"},
        ]
    }));
    assert_eq!(
        got,
        vec![
            json!({"site": "production", "datacenter": "site-a"}),
            json!({"site": "staging", "datacenter": "site-b"}),
        ]
    );
}

// The documented exclude example: 12 - 1 - 2 = 9 jobs.
#[test]
fn documented_exclude_is_a_partial_match() {
    let got = cells(json!({
        "os": ["macos-latest", "windows-latest"],
        "version": [12, 14, 16],
        "environment": ["staging", "production"],
        "exclude": [
            {"os": "macos-latest", "version": 12, "environment": "production"},
            {"os": "windows-latest", "version": 16},
        ]
    }));
    assert_eq!(got.len(), 9);
    assert!(
        !got.contains(&json!({"os": "macos-latest", "version": 12, "environment": "production"}))
    );
    assert!(
        !got.iter()
            .any(|c| c["os"] == "windows-latest" && c["version"] == 16)
    );
}

// The documented fail-fast example: versions 6, 7, 8 plus an experimental 9.
#[test]
fn documented_include_adds_a_new_combination() {
    let got = cells(json!({
        "version": [6, 7, 8],
        "experimental": [false],
        "include": [{"version": 9, "experimental": true}]
    }));
    assert_eq!(got.len(), 4);
    assert_eq!(got[3], json!({"version": 9, "experimental": true}));
}

#[test]
fn include_adds_back_an_excluded_combination() {
    let got = cells(json!({
        "os": ["linux", "windows"],
        "arch": ["x64", "arm64"],
        "exclude": [{"os": "windows", "arch": "arm64"}],
        "include": [{"os": "windows", "arch": "arm64", "note": "back"}]
    }));
    assert_eq!(got.len(), 4);
    assert_eq!(
        got[3],
        json!({"os": "windows", "arch": "arm64", "note": "back"})
    );
}

#[test]
fn include_entries_never_extend_include_only_cells() {
    let got = cells(json!({
        "os": ["linux"],
        "include": [{"os": "mac"}, {"os": "mac", "xcode": 15}]
    }));
    assert_eq!(
        got,
        vec![
            json!({"os": "linux"}),
            json!({"os": "mac"}),
            json!({"os": "mac", "xcode": 15})
        ]
    );
}

#[test]
fn include_only_cell_lists_dimension_keys_first() {
    let got = cells(json!({
        "os": ["linux"],
        "include": [{"extra": 1, "os": "mac"}]
    }));
    let keys: Vec<&String> = got[1].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["os", "extra"]);
}

#[test]
fn everything_excluded_gives_no_cells() {
    assert!(cells(json!({"os": ["linux"], "exclude": [{"os": "linux"}]})).is_empty());
}

// Extras-only includes match every kept cell; with nothing kept they run on their own.
#[test]
fn extras_only_include_with_everything_excluded_runs_alone() {
    let got = cells(json!({
        "os": ["linux"],
        "exclude": [{"os": "linux"}],
        "include": [{"color": "green"}]
    }));
    assert_eq!(got, vec![json!({"color": "green"})]);
}

#[test_case(json!({"os": "Ubuntu-Latest"}), 0 ; "strings ignore case")]
#[test_case(json!({"version": "12"}), 2 ; "a numeric string equals the number")]
#[test_case(json!({"version": " 12 "}), 2 ; "whitespace around a number is ignored")]
#[test_case(json!({"version": "0xc"}), 2 ; "hex strings are numbers")]
#[test_case(json!({"version": "twelve"}), 3 ; "a word is not a number")]
#[test_case(json!({"version": 12.0}), 2 ; "12.0 equals 12")]
fn exclude_uses_loose_equality(filter: Value, remaining: usize) {
    let got = cells(json!({
        "os": ["ubuntu-latest"],
        "version": [10, 12, 14],
        "exclude": [filter]
    }));
    assert_eq!(got.len(), remaining, "{got:?}");
}

#[test]
fn object_values_match_leaf_by_leaf() {
    let m = json!({
        "node": [{"version": 14, "env": "a"}, {"version": 20, "env": "b"}],
        "os": ["linux", "mac"],
        "exclude": [{"node": {"version": 20}, "os": "mac"}],
        "include": [{"node": {"version": 14}, "legacy": true}]
    });
    let got = cells(m);
    assert_eq!(got.len(), 3);
    assert_eq!(got[0]["legacy"], true);
    assert_eq!(got[1]["legacy"], true);
    assert!(got[2].get("legacy").is_none());
}

#[test]
fn array_values_match_by_position() {
    let got = cells(json!({
        "flags": [["-O2", "-g"], ["-O3"]],
        "exclude": [{"flags": ["-O3"]}]
    }));
    assert_eq!(got, vec![json!({"flags": ["-O2", "-g"]})]);
}

#[test]
fn missing_keys_compare_as_null() {
    // `null` in a filter matches a cell that lacks the key deeper down.
    let got = cells(json!({
        "cfg": [{"a": 1}, {"a": 1, "b": 2}],
        "exclude": [{"cfg": {"b": null}}]
    }));
    assert_eq!(got, vec![json!({"cfg": {"a": 1, "b": 2}})]);
}

#[test]
fn later_includes_overwrite_added_values_but_never_dimensions() {
    let got = cells(json!({
        "os": ["linux", "mac"],
        "include": [{"color": "green"}, {"color": "pink"}, {"os": "linux", "color": "red"}]
    }));
    assert_eq!(
        got,
        vec![
            json!({"os": "linux", "color": "red"}),
            json!({"os": "mac", "color": "pink"})
        ]
    );
}

#[test_case(json!({"allreduce": ["nccl", "custom"], "bs": [128, 512]}), &["bench (nccl, 128)", "bench (nccl, 512)", "bench (custom, 128)", "bench (custom, 512)"] ; "dimension values in order")]
#[test_case(json!({"os": ["w"], "node": [16], "include": [{"os": "w", "node": 16, "npm": 6}]}), &["bench (w, 16)"] ; "include extras are not shown")]
#[test_case(json!({"os": ["w"], "include": [{"extra": "x", "os": "m"}]}), &["bench (w)", "bench (m, x)"] ; "include only cells show all values")]
#[test_case(json!({"cfg": [{"v": 14, "env": "a"}], "x": [null, ""], "b": [true]}), &["bench (14, a, true)", "bench (14, a, true)"] ; "objects show leaves null and empty are skipped")]
#[test_case(json!({"f": [3.10, 2.0, 1e3]}), &["bench (3.1)", "bench (2)", "bench (1000)"] ; "numbers in short form")]
fn display_names(m: Value, expected: &[&str]) {
    assert_eq!(names("bench", m), expected);
}

#[test]
fn long_names_are_cut_like_github() {
    let long = "x".repeat(120);
    let name = &names("job", json!({"a": [long]}))[0];
    assert_eq!(name.chars().count(), 100);
    assert!(name.ends_with("..."));
}

#[test]
fn no_matrix_cell_is_the_job_name() {
    assert_eq!(MatrixCell::no_matrix().display_name("report"), "report");
}

#[test]
fn empty_dimension_is_an_error() {
    assert_eq!(
        errors(json!({"os": [], "v": [1]})),
        vec![MatrixError::EmptyDimension {
            dimension: "os".into(),
            index: 0
        }]
    );
    assert_eq!(
        MatrixError::EmptyDimension {
            dimension: "os".into(),
            index: 0
        }
        .to_string(),
        "matrix dimension `os` has no values"
    );
}

#[test]
fn empty_matrix_is_an_error() {
    assert_eq!(errors(json!({})), vec![MatrixError::Empty]);
}

#[test]
fn unknown_exclude_key_suggests_a_dimension() {
    let errs = errors(json!({
        "python": ["3.11"],
        "os": ["linux"],
        "exclude": [{"os": "linux"}, {"pyton": "3.11"}]
    }));
    assert_eq!(errs.len(), 1);
    let MatrixError::UnknownExcludeKey { entry, key, .. } = &errs[0] else {
        panic!("{errs:?}")
    };
    assert_eq!((*entry, key.as_str()), (1, "pyton"));
    assert_eq!(
        errs[0].to_string(),
        "`exclude` key `pyton` is not a dimension of the matrix"
    );
    assert_eq!(errs[0].hint().as_deref(), Some("did you mean `python`?"));
}

#[test]
fn unknown_exclude_key_without_close_match_lists_dimensions() {
    let errs = errors(json!({"os": ["l"], "arch": ["x"], "exclude": [{"zzz": 1}]}));
    assert_eq!(
        errs[0].hint().as_deref(),
        Some("the dimensions are `os` and `arch`")
    );
}

#[test]
fn include_keys_need_not_be_dimensions() {
    assert!(expand(&input(json!({"os": ["l"], "include": [{"anything": 1}]}))).is_ok());
}

#[test]
fn all_input_errors_are_reported_together() {
    let errs = errors(json!({
        "os": [],
        "exclude": [{}, {"nope": 1}],
        "include": [{}]
    }));
    assert_eq!(errs.len(), 4, "{errs:?}");
}

#[test]
fn more_than_256_cells_is_an_error_naming_the_count() {
    let v: Vec<Value> = (0..20).map(Value::from).collect();
    let m = json!({"a": v.clone(), "b": v, "include": [{"a": 99}]});
    assert_eq!(errors(m), vec![MatrixError::TooManyCells { count: 401 }]);
    assert_eq!(
        MatrixError::TooManyCells { count: 401 }.to_string(),
        "the matrix expands to 401 jobs, more than the limit of 256"
    );
}

#[test]
fn exactly_256_cells_is_fine() {
    let v: Vec<Value> = (0..16).map(Value::from).collect();
    assert_eq!(cells(json!({"a": v.clone(), "b": v})).len(), 256);
}

#[test]
fn exclude_can_bring_a_large_product_under_the_limit() {
    let v: Vec<Value> = (0..20).map(Value::from).collect();
    let m = json!({"a": v.clone(), "b": v, "exclude": [{"a": 0}, {"a": 1}, {"a": 2}, {"a": 3}, {"a": 4}, {"a": 5}, {"a": 6}, {"a": 7}]});
    assert_eq!(cells(m).len(), 240);
}

#[test]
fn huge_products_are_refused_without_enumerating() {
    let v: Vec<Value> = (0..100).map(Value::from).collect();
    let m = json!({"a": v.clone(), "b": v.clone(), "c": v.clone(), "d": v});
    assert_eq!(
        errors(m),
        vec![MatrixError::ProductTooLarge {
            product: 100_000_000
        }]
    );
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        (0i64..4).prop_map(Value::from),
        "[a-c]".prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
    ]
}

/// Up to 3 dimensions of up to 4 distinct values each, plus excludes over them.
fn matrix_without_includes() -> impl Strategy<Value = MatrixInput> {
    let dims = prop::collection::vec(prop::collection::vec(scalar(), 1..5), 1..4);
    dims.prop_flat_map(|dims| {
        let dims: Vec<Vec<Value>> = dims
            .into_iter()
            .map(|mut d| {
                // Distinct under loose equality, so the product has no duplicates to begin with.
                let mut out: Vec<Value> = Vec::new();
                for v in d.drain(..) {
                    if !out.iter().any(|o| loose_eq(o, &v)) {
                        out.push(v);
                    }
                }
                out
            })
            .collect();
        let n = dims.len();
        let excludes = prop::collection::vec(prop::collection::vec((0..n, 0usize..4), 1..3), 0..4);
        (Just(dims), excludes)
    })
    .prop_map(|(dims, excludes)| {
        let mut m = MatrixInput::default();
        for (i, d) in dims.iter().enumerate() {
            m.dimensions.insert(format!("d{i}"), d.clone());
        }
        for ex in excludes {
            let mut e = IndexMap::new();
            for (dim, pick) in ex {
                let d = &dims[dim];
                e.insert(format!("d{dim}"), d[pick % d.len()].clone());
            }
            m.exclude.push(e);
        }
        m
    })
}

fn product_of(m: &MatrixInput) -> Vec<IndexMap<String, Value>> {
    let mut out = vec![IndexMap::new()];
    for (k, vals) in &m.dimensions {
        out = out
            .into_iter()
            .flat_map(|c| {
                vals.iter().map(move |v| {
                    let mut c = c.clone();
                    c.insert(k.clone(), v.clone());
                    c
                })
            })
            .collect();
    }
    out
}

/// Any JSON a YAML file could hold, a few levels deep.
fn any_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        "[a-cA-C0-9x. +-]{0,4}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::vec(("[a-c]", inner), 0..3)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

fn any_entries() -> impl Strategy<Value = Vec<IndexMap<String, Value>>> {
    prop::collection::vec(
        prop::collection::vec(("[a-e]", any_value()), 0..3).prop_map(|kv| kv.into_iter().collect()),
        0..4,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn never_panics_and_respects_the_limit(
        dims in prop::collection::vec(("[a-e]", prop::collection::vec(any_value(), 0..8)), 0..4),
        include in any_entries(),
        exclude in any_entries(),
    ) {
        let m = MatrixInput { dimensions: dims.into_iter().collect(), include, exclude };
        if let Ok(cells) = expand(&m) {
            prop_assert!(cells.len() <= MAX_CELLS);
            for c in &cells {
                let _ = c.display_name("job");
            }
        }
    }

    #[test]
    fn without_includes_cells_are_the_product_minus_excluded(m in matrix_without_includes()) {
        let got: Vec<IndexMap<String, Value>> =
            expand(&m).unwrap().into_iter().map(|c| c.values).collect();
        let product = product_of(&m);
        let excluded: Vec<&IndexMap<String, Value>> = product
            .iter()
            .filter(|c| m.exclude.iter().any(|e| filter_matches(e, c)))
            .collect();
        prop_assert_eq!(got.len(), product.len() - excluded.len());
        for (i, a) in got.iter().enumerate() {
            for b in &got[i + 1..] {
                prop_assert_ne!(a, b);
            }
            prop_assert!(!m.exclude.iter().any(|e| filter_matches(e, a)));
        }
        // Every kept combination appears exactly once, in product order.
        let kept: Vec<&IndexMap<String, Value>> =
            product.iter().filter(|c| !excluded.contains(c)).collect();
        prop_assert_eq!(got.iter().collect::<Vec<_>>(), kept);
    }

    #[test]
    fn includes_keep_every_original_cell_and_add_their_keys(
        m in matrix_without_includes(),
        incs in prop::collection::vec(prop::collection::vec((0usize..5, scalar()), 1..3), 0..4),
    ) {
        let mut m = m;
        let dim_keys: Vec<String> = m.dimensions.keys().cloned().collect();
        for inc in incs {
            let mut e = IndexMap::new();
            for (slot, v) in inc {
                // Slots past the dimensions name new keys.
                let key = dim_keys.get(slot).cloned().unwrap_or_else(|| format!("x{slot}"));
                e.insert(key, v);
            }
            m.include.push(e);
        }
        let got = expand(&m).unwrap();
        let without = {
            let mut n = m.clone();
            n.include.clear();
            expand(&n).unwrap()
        };
        // Original cells survive, in order, with their dimension values untouched.
        prop_assert!(got.len() >= without.len());
        for (g, w) in got.iter().zip(&without) {
            prop_assert_eq!(g.origin, CellOrigin::Product);
            for (k, v) in &w.values {
                prop_assert_eq!(g.values.get(k), Some(v));
            }
        }
        // Every include entry's keys show up somewhere.
        for inc in &m.include {
            prop_assert!(got.iter().any(|c| inc.keys().all(|k| c.values.contains_key(k))));
        }
        for c in &got[without.len()..] {
            prop_assert!(matches!(c.origin, CellOrigin::Include(_)));
        }
    }
}
