//! [`Error`]: why a run failed.

use std::fmt;
use std::path::PathBuf;

use tcpdx_capture::CaptureError;
use tcpdx_export::ExportError;

/// Why a run failed. Only the input can be bad: the analysis never refuses a packet.
#[derive(Debug)]
pub enum Error {
    /// The capture could not be opened or read (the byte where it went wrong is named).
    Capture(CaptureError),
    /// A spill file could not be written or read back (the diagnosis would be incomplete).
    Spill {
        /// The directory of the spill files.
        dir: PathBuf,
        /// What went wrong.
        error: std::io::Error,
    },
    /// The directory of the Parquet tables could not be created.
    CreateDir {
        /// The directory.
        dir: PathBuf,
        /// What went wrong.
        error: std::io::Error,
    },
    /// Writing the Parquet tables failed.
    Export(ExportError),
    /// A second pass over a capture read from a stream ([`Capture::from_reader`](crate::Capture::from_reader)).
    ReadTwice,
    /// An analysis thread could not be started or stopped unexpectedly.
    Thread(String),
    /// A table's rows could not be built (a bug: a row that does not fit its schema).
    Table(tcpdx_export::TableError),
    /// The [`Progress`](crate::Progress) callback asked to stop.
    Cancelled,
    /// The shards of a distributed run are missing, damaged or do not fit together (the
    /// message names the file).
    Shard(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Capture(e) => e.fmt(f),
            Error::Spill { dir, error } => write!(
                f,
                "spill file in {} (set TMPDIR to another directory): {error}",
                dir.display()
            ),
            Error::CreateDir { dir, .. } => write!(f, "{}: cannot create", dir.display()),
            Error::Export(e) => e.fmt(f),
            Error::ReadTwice => f.write_str("a capture read from a stream cannot be read twice"),
            Error::Thread(m) | Error::Shard(m) => f.write_str(m),
            Error::Table(e) => e.fmt(f),
            Error::Cancelled => f.write_str("cancelled"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        // Transparent: the wrapped error's own causes follow its message.
        match self {
            Error::Capture(e) => e.source(),
            Error::Export(e) => e.source(),
            Error::CreateDir { error, .. } => Some(error),
            Error::Spill { .. }
            | Error::ReadTwice
            | Error::Thread(_)
            | Error::Table(_)
            | Error::Cancelled
            | Error::Shard(_) => None,
        }
    }
}

impl Error {
    /// The error and its causes on one line, each cause said once (a cause whose text the
    /// message already holds is not repeated): what the `tcpdx` command prints after
    /// `tcpdx: `.
    pub fn one_line(&self) -> String {
        let mut line = self.to_string();
        let mut cause = std::error::Error::source(self);
        while let Some(c) = cause {
            let text = c.to_string();
            if !line.contains(&text) {
                line.push_str(": ");
                line.push_str(&text);
            }
            cause = c.source();
        }
        line
    }
}

impl From<CaptureError> for Error {
    fn from(e: CaptureError) -> Self {
        Error::Capture(e)
    }
}

impl From<ExportError> for Error {
    fn from(e: ExportError) -> Self {
        Error::Export(e)
    }
}
