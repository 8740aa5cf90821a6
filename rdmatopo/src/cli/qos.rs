//! `rdmatopo qos`: the RoCE QoS of every RDMA port (traffic class, priority, ECN,
//! lossless priorities, VF settings) as far as sysfs shows it, and the `NCCL_IB_TC` the
//! facts support.

use super::args::{Format, RootArgs};
use super::output::{Output, json};
use crate::export::qos::{report_shown, table};
use crate::view::container::DisplayedDevices;
use clap::Args;

#[derive(Args, Debug)]
pub struct QosArgs {
    #[command(flatten)]
    pub root: RootArgs,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Every RDMA device visible, even inside a container (whose own devices are the
    /// default where they are certain).
    #[arg(long)]
    pub all: bool,
}

pub fn run(args: &QosArgs) -> Result<Output, String> {
    let topo = args.root.discover_owned(crate::Needs::ALL, args.all)?;
    let v = report_shown(&topo, &DisplayedDevices::of(&topo, args.all));
    let text = match args.format {
        Format::Json => json(&v),
        Format::Table => table(&topo.root, &v),
    };
    Ok(Output::ok(text))
}
