//! `bosun`: the controller's command line.

use clap::Parser;

/// jemalloc: the controller allocates many small JSON values per object; glibc's malloc cost
/// ~13% of its CPU in the benchmark and made latency under load worse.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    bosun_controller::cli::main(bosun_controller::cli::Cli::parse()).await
}
