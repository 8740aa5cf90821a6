//! `rdmatopo qos`: the RoCE QoS of every RDMA port (traffic class, priority, ECN,
//! lossless priorities, VF settings) as far as sysfs shows it, and the `NCCL_IB_TC` the
//! facts support.

use super::{Format, Output, RootArgs, json};
use clap::Args;
use rdmatopo::export::qos::{report, table};

#[derive(Args, Debug)]
pub struct QosArgs {
    #[command(flatten)]
    pub root: RootArgs,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

pub fn run(args: &QosArgs) -> Result<Output, String> {
    let (_, topo) = args.root.discover()?;
    let v = report(&topo);
    Ok(Output::ok(match args.format {
        Format::Json => json(&v),
        Format::Table => table(&topo.root, &v),
    }))
}
