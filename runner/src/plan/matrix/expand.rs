//! The expansion itself: the product, `exclude`, then `include`, in GitHub's order.

use indexmap::IndexMap;
use serde_json::Value;

use super::cell::{CellOrigin, MatrixCell};
use super::error::MatrixError;
use super::input::{MAX_CELLS, MatrixInput};
use super::matching::{filter_matches, leaf_match};
use crate::diag::did_you_mean;

/// Above this many combinations the product is not even enumerated: no realistic set of
/// `exclude` entries brings it back under [`MAX_CELLS`], and enumerating it would take long.
const MAX_PRODUCT: u128 = 1 << 20;

/// Expands a matrix into its cells, in the order GitHub creates the jobs.
///
/// All input problems are returned together; the size limit is checked only once the input is
/// well-formed. A matrix whose every combination is excluded yields no cells: GitHub then skips
/// the job, which is the caller's to show.
pub fn expand(input: &MatrixInput) -> Result<Vec<MatrixCell>, Vec<MatrixError>> {
    check(input)?;
    let dims: Vec<(&String, &Vec<Value>)> = input.dimensions.iter().collect();
    let product: u128 = if dims.is_empty() {
        // No dimensions means no product at all (not one empty combination), so an
        // include-only matrix runs exactly its entries.
        0
    } else {
        dims.iter().fold(1u128, |acc, (_, values)| {
            acc.saturating_mul(values.len() as u128)
        })
    };
    if product > MAX_PRODUCT {
        return Err(vec![MatrixError::ProductTooLarge { product }]);
    }

    let includes: Vec<IncludeEntry<'_>> = input
        .include
        .iter()
        .map(|entry| IncludeEntry::split(entry, &input.dimensions))
        .collect();
    let mut matched = vec![false; includes.len()];
    let mut cells = Vec::new();
    let mut count = 0usize;
    let mut values: IndexMap<String, Value> = IndexMap::with_capacity(dims.len());
    for index in 0..product {
        values.clear();
        // Mixed-radix digits of `index`, last dimension fastest.
        let mut rest = index;
        let mut digits = vec![0usize; dims.len()];
        for (slot, (_, vals)) in digits.iter_mut().zip(&dims).rev() {
            let len = vals.len() as u128;
            *slot = (rest % len) as usize;
            rest /= len;
        }
        for ((key, vals), digit) in dims.iter().zip(&digits) {
            values.insert((*key).clone(), vals[*digit].clone());
        }
        if input.exclude.iter().any(|f| filter_matches(f, &values)) {
            continue;
        }
        let mut cell = values.clone();
        for (entry, was_matched) in includes.iter().zip(matched.iter_mut()) {
            if entry.filter.iter().all(|(k, v)| leaf_match(&values, k, v)) {
                *was_matched = true;
                for (k, v) in &entry.extras {
                    cell.insert((*k).clone(), (*v).clone());
                }
            }
        }
        count += 1;
        if count <= MAX_CELLS {
            cells.push(MatrixCell {
                values: cell,
                origin: CellOrigin::Product,
                named: dims.len(),
            });
        }
    }
    for (index, (entry, was_matched)) in includes.iter().zip(&matched).enumerate() {
        if *was_matched {
            continue;
        }
        count += 1;
        if count <= MAX_CELLS {
            // Dimension keys first, then the rest, each in the order written: GitHub's order.
            let values: IndexMap<String, Value> = entry
                .filter
                .iter()
                .chain(&entry.extras)
                .map(|(k, v)| ((*k).clone(), (*v).clone()))
                .collect();
            let named = values.len();
            cells.push(MatrixCell {
                values,
                origin: CellOrigin::Include(index),
                named,
            });
        }
    }
    if count > MAX_CELLS {
        return Err(vec![MatrixError::TooManyCells { count }]);
    }
    Ok(cells)
}

/// Every structural problem of the input, in written order.
fn check(input: &MatrixInput) -> Result<(), Vec<MatrixError>> {
    let mut errors = Vec::new();
    if input.dimensions.is_empty() && input.include.is_empty() {
        errors.push(MatrixError::Empty);
    }
    for (index, (dimension, values)) in input.dimensions.iter().enumerate() {
        if values.is_empty() {
            errors.push(MatrixError::EmptyDimension {
                dimension: dimension.clone(),
                index,
            });
        }
    }
    let dimensions: Vec<String> = input.dimensions.keys().cloned().collect();
    for (entry, filter) in input.exclude.iter().enumerate() {
        if filter.is_empty() {
            errors.push(MatrixError::EmptyExclude { entry });
        }
        for key in filter.keys() {
            if !input.dimensions.contains_key(key) {
                errors.push(MatrixError::UnknownExcludeKey {
                    entry,
                    key: key.clone(),
                    suggestion: did_you_mean(key, &dimensions),
                    dimensions: dimensions.clone(),
                });
            }
        }
    }
    for (entry, values) in input.include.iter().enumerate() {
        if values.is_empty() {
            errors.push(MatrixError::EmptyInclude { entry });
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// An `include` entry split the way GitHub applies it.
struct IncludeEntry<'a> {
    /// Keys that are dimensions: a cell must have these values to be extended.
    filter: Vec<(&'a String, &'a Value)>,
    /// Other keys: the values added to every matching cell.
    extras: Vec<(&'a String, &'a Value)>,
}

impl<'a> IncludeEntry<'a> {
    fn split(entry: &'a IndexMap<String, Value>, dims: &IndexMap<String, Vec<Value>>) -> Self {
        let (filter, extras) = entry.iter().partition(|(k, _)| dims.contains_key(*k));
        Self { filter, extras }
    }
}
