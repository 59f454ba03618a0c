//! Built-in steps and their declared inputs. (being written)
