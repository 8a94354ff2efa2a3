//! Workloads run inside the lab namespaces: bulk TCP ([`bulk`]), request/response ([`reqresp`]) and storage ([`crate::storage`]).
pub mod bulk;
pub mod reqresp;
