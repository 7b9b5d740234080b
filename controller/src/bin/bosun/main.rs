//! `bosun`: the controller's command line. The library knows nothing of flags, log output or
//! child processes; this binary parses the flags ([`cli`]), sets up logging and signals, and
//! calls the library's `run`, or runs the development loop ([`dev`]) with its supervised
//! handler server command ([`supervise`]).

mod cli;
mod dev;
mod inspect;
mod logging;
mod peers;
mod rbac;
mod supervise;
mod telemetry;

/// jemalloc: the controller allocates many small JSON values per object; glibc's malloc cost
/// ~13% of its CPU in the benchmark and made latency under load worse. Its background thread
/// (feature `background_threads`) returns freed memory to the system while the controller is
/// idle; by default jemalloc purges only while the program allocates, so an idle controller
/// kept the peak of its initial listing. `.cargo/config.toml` shortens the decay to 1 s.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    cli::main(cli::Cli::parse_noting_explicit()).await
}
