//! Planning: matrix expansion and the job graph. (being written)
