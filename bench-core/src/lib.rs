//! bench-core: the verbs engine of railbench.
