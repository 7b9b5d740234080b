//! `bosun`: the controller's command line. The library knows nothing of flags, log output or
//! child processes; this binary parses the flags ([`args`]), sets up logging and signals, and
//! calls the library's `run`, or runs the development loop ([`dev`]) with its supervised
//! handler server command ([`supervise`]).

use anyhow::Context as _;
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand};

mod args;
mod dev;
mod group;
mod guard;
mod handler_files;
mod inspect;
mod logging;
mod peers;
mod rbac;
mod supervise;
mod telemetry;

/// Bosun: Kopf's semantics, handlers in any language over gRPC.
#[derive(Debug, Parser)]
#[command(name = "bosun", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// Parses the command line, noting which controller flags were given explicitly.
    pub fn parse_noting_explicit() -> Cli {
        let matches = Cli::command().get_matches();
        let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
        cli.note_explicit(&matches);
        cli
    }

    /// Notes in the controller flags which of them `matches` has explicitly.
    pub fn note_explicit(&mut self, matches: &ArgMatches) {
        let Some((_, sub)) = matches.subcommand() else { return };
        let controller = match &mut self.command {
            Command::Run(args) => &mut args.controller,
            Command::Dev(args) => &mut args.controller,
            _ => return,
        };
        controller.explicit = args::explicit_flags(sub);
    }
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the controller against a cluster (kubeconfig, context or in-cluster account).
    Run(args::RunArgs),
    /// Start the embedded dev cluster, apply manifests, start a handler server and run the
    /// controller against them until Ctrl-C.
    Dev(args::DevArgs),
    /// Pause the controllers of a peering for a while (as `kopf freeze`).
    Freeze(crate::peers::FreezeArgs),
    /// Let the controllers of a peering go on before the freeze ends (as `kopf resume`).
    Resume(crate::peers::ResumeArgs),
    /// List the members of a shard group and how many objects each handles.
    Shards(crate::peers::ShardsArgs),
    /// Explain one object as the controller sees it: the cause in progress, each handler's
    /// record (retries, next attempt, last message), the finalizer, the diffbase.
    Inspect(crate::inspect::InspectArgs),
    /// Print the least-privilege ClusterRole/Roles and bindings the controller needs for the
    /// handlers its servers register, run with the same flags as `bosun run`.
    Rbac(crate::rbac::RbacArgs),
    /// What `run` and `dev` start their handler server command under, so that it never
    /// outlives them (see `guard.rs`).
    #[command(name = "__guard", hide = true)]
    Guard {
        /// The command.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
}

/// jemalloc: the controller allocates many small JSON values per object; glibc's malloc cost
/// ~13% of its CPU in the benchmark and made latency under load worse. Its background thread
/// (feature `background_threads`) returns freed memory to the system while the controller is
/// idle; by default jemalloc purges only while the program allocates, so an idle controller
/// kept the peak of its initial listing. `.cargo/config.toml` shortens the decay to 1 s.
/// The feature `jemalloc` (the shipped builds: the image, the wheel, the bench) turns it on.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let detail = wants_detail(std::env::args().skip(1));
    match run(Cli::parse_noting_explicit()).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{}", error_text(&e, detail));
            std::process::ExitCode::FAILURE
        }
    }
}

/// Whether the command line asks for detail (`-v`/`--verbose`, `-d`/`--debug`), before a `--`
/// (what follows it is the handler server's own command line).
fn wants_detail(args: impl IntoIterator<Item = String>) -> bool {
    args.into_iter().take_while(|a| a != "--").any(|a| {
        matches!(a.as_str(), "--verbose" | "--debug")
            || (a.starts_with('-') && !a.starts_with("--") && a[1..].chars().any(|c| c == 'v' || c == 'd'))
    })
}

/// How a failed command says why, as CLIs of the field do: one line, the error's causes joined
/// (`Error: what: why`), whatever `RUST_BACKTRACE` says; with `detail`, each cause on its own
/// line and the backtrace when one was captured.
fn error_text(e: &anyhow::Error, detail: bool) -> String {
    if detail { format!("Error: {e:?}") } else { format!("Error: {e:#}") }
}

/// Runs the parsed command line.
async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Run(args) => {
            let _telemetry = crate::logging::init_tracing(&args.controller.log)?;
            let stop = supervise::stop_signal().context("cannot install the SIGINT and SIGTERM handlers")?;
            let command = args.server.command(args.controller.log.debugging())?;
            let client = args.controller.client().await?;
            let mut settings = args.controller.settings();
            let cluster = args.controller.cluster.for_child()?;
            let child = command.map(|command| crate::supervise::start(command, &mut settings, cluster)).transpose()?;
            let result = bosun_controller::run(client, settings, stop).await;
            if let Some(child) = child {
                child.stop().await;
            }
            Ok(result?)
        }
        Command::Dev(args) => {
            let _telemetry = crate::logging::init_tracing(&args.controller.log)?;
            crate::dev::dev(args).await
        }
        Command::Freeze(args) => crate::peers::freeze(args).await,
        Command::Resume(args) => crate::peers::resume(args).await,
        Command::Shards(args) => crate::peers::shards(args).await,
        Command::Inspect(args) => crate::inspect::inspect(args).await,
        Command::Rbac(args) => crate::rbac::rbac(args).await,
        Command::Guard { command } => crate::guard::guard(command).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detail_is_asked_for_by_verbose_or_debug_before_the_handler_command() {
        let cases: [(&[&str], bool); 8] = [
            (&["dev", "x.py"], false),
            (&["dev", "-v", "x.py"], true),
            (&["run", "--debug", "-A"], true),
            (&["run", "-Ad"], true),
            (&["run", "--verbose"], true),
            (&["dev", "--", "python", "-v", "x.py"], false),
            (&["run", "-P", "team", "-p", "-5"], false),
            (&["dev", "--apply", "obj-dev.yaml"], false),
        ];
        for (args, want) in cases {
            assert_eq!(wants_detail(args.iter().map(|a| a.to_string())), want, "{args:?}");
        }
    }

    #[test]
    fn an_error_is_one_line_with_its_causes_joined_unless_detail_is_asked_for() {
        let e = anyhow::anyhow!("no such file").context("nosuchfile.py: no such handler file");
        assert_eq!(error_text(&e, false), "Error: nosuchfile.py: no such handler file: no such file");
        let detailed = error_text(&e, true);
        assert!(detailed.starts_with("Error: nosuchfile.py: no such handler file\n\nCaused by:\n"), "{detailed}");
    }
}
