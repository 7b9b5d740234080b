//! `bosun`: the controller's command line.

use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    bosun_controller::cli::main(bosun_controller::cli::Cli::parse()).await
}
