//! The workflow and action model and its strict loader. (being written)
