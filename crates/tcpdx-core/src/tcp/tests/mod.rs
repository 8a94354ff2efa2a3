//! Scenario tests (added with the test kit).
