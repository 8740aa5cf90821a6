//! The arguments every command about a machine shares: where to read from, and the
//! output format.

use crate::{Sysfs, Topology};
use clap::{Args, ValueEnum};
use std::path::PathBuf;

// Where to read from (no doc comment: clap would take it as each command's about).
#[derive(Args, Debug, Clone)]
pub struct RootArgs {
    /// Root holding sys/, proc/ and dev/ (a captured tree); `/` is this machine.
    #[arg(long, env = "RDMATOPO_ROOT", value_name = "DIR")]
    pub root: Option<PathBuf>,
}

impl RootArgs {
    pub fn open(&self) -> Result<Sysfs, String> {
        crate::open_root(self.root.as_deref()).map_err(|e| e.to_string())
    }

    /// Discover the whole machine, all of it read for `needs`.
    pub fn discover(&self, needs: crate::Needs) -> Result<Topology, String> {
        let fs = self.open()?;
        crate::discover_needs(&fs, needs).map_err(|e| e.to_string())
    }

    /// Discover what `needs` asks for, inside a container only of its own devices
    /// unless `all` (see `crate::discover_view`).
    pub fn discover_owned(&self, needs: crate::Needs, all: bool) -> Result<Topology, String> {
        let fs = self.open()?;
        let view = if all {
            crate::View::All
        } else {
            crate::View::Owned
        };
        crate::discover_view(&fs, needs, view).map_err(|e| e.to_string())
    }
}

/// Output format of the table-or-JSON commands.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
}
