//! Workloads run inside the lab namespaces: bulk TCP ([`bulk`]) and storage ([`crate::storage`]).
pub mod bulk;
