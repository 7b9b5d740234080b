//! The command line: `bosun run` against a cluster, `bosun dev` on the embedded dev
//! cluster. Every flag has a `BOSUN_*` environment equivalent.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use bosun_controller::cluster::posting::Posting;
use bosun_controller::endpoints::webhooks::Certificate;
use bosun_controller::logs::Level;
use bosun_controller::{Namespaces, Settings, StorageMode};
use clap::parser::ValueSource;
use clap::{ArgMatches, Args, ValueEnum};

/// The controller flags given on the command line or by their variable (not by default), as
/// `--flag`.
pub fn explicit_flags(matches: &ArgMatches) -> BTreeSet<String> {
    let flags = ControllerArgs::augment_args(clap::Command::new("bosun"));
    flags
        .get_arguments()
        .filter(|a| matches!(matches.value_source(a.get_id().as_str()), Some(ValueSource::CommandLine | ValueSource::EnvVariable)))
        .filter_map(|a| a.get_long().map(|long| format!("--{long}")))
        .collect()
}

/// Flags shared by `run` and `dev`.
#[derive(Debug, Args, Clone)]
pub struct ControllerArgs {
    /// Handler server address: http://host:port or unix:///path (repeatable). TLS (https://) is
    /// not supported: run the handler server beside the controller (loopback or a Unix socket).
    #[arg(long = "handler", env = "BOSUN_HANDLERS", value_delimiter = ',')]
    pub handlers: Vec<String>,
    /// Serve these namespaces (globs and !negation allowed; repeatable).
    #[arg(short = 'n', long = "namespace", env = "BOSUN_NAMESPACES", value_delimiter = ',')]
    pub namespaces: Vec<String>,
    /// Serve all namespaces (the default when no -n is given).
    #[arg(short = 'A', long = "all-namespaces", conflicts_with = "namespaces")]
    pub all_namespaces: bool,
    /// Run without peering.
    #[arg(long, env = "BOSUN_STANDALONE")]
    pub standalone: bool,
    /// The peering object to take part in; it must exist (without this flag: `default`, and
    /// standalone when it does not exist).
    #[arg(short = 'P', long, env = "BOSUN_PEERING", conflicts_with = "standalone")]
    pub peering: Option<String>,
    /// This controller's priority among its peers: lower ones pause while it runs.
    #[arg(short = 'p', long, env = "BOSUN_PRIORITY", allow_negative_numbers = true)]
    pub priority: Option<i64>,
    /// Development mode: priority 666, so deployed controllers of the same peering pause.
    #[arg(long, conflicts_with = "priority")]
    pub dev: bool,
    /// How long this controller's peering record counts after each keepalive, in seconds.
    #[arg(long, env = "BOSUN_PEERING_LIFETIME", default_value_t = 60, value_name = "SECONDS")]
    pub peering_lifetime: u64,
    /// This controller's identity to peers and in Leases (default: $POD_ID or $POD_NAME, else
    /// user@host/time/random).
    #[arg(long, env = "BOSUN_IDENTITY")]
    pub identity: Option<String>,
    /// Only the holder of a Lease handles objects; other replicas wait with warm watches.
    #[arg(long, env = "BOSUN_LEADER_ELECTION", conflicts_with = "shards")]
    pub leader_election: bool,
    /// Replicas share the objects: `auto` spreads them over the live replicas by consistent
    /// hashing, each replica holding a Lease of its own.
    #[arg(long, env = "BOSUN_SHARDS", value_enum)]
    pub shards: Option<Shards>,
    /// The Lease's name (the shard group's, with --shards).
    #[arg(long, env = "BOSUN_LEASE_NAME", default_value = "bosun")]
    pub lease_name: String,
    /// The Lease's namespace (default: $POD_NAMESPACE, else the service account's, else `default`).
    #[arg(long, env = "BOSUN_LEASE_NAMESPACE")]
    pub lease_namespace: Option<String>,
    /// How long a Lease is held after its last renewal, in seconds.
    #[arg(long, env = "BOSUN_LEASE_DURATION", default_value_t = 15, value_name = "SECONDS")]
    pub lease_duration: u64,
    /// Prefix of the annotations and finalizer Bosun writes.
    #[arg(long, env = "BOSUN_PREFIX", default_value = "bosun.dev")]
    pub prefix: String,
    /// Write Kopf's exact annotations and finalizer, to replace a Kopf operator in place.
    #[arg(long, env = "BOSUN_KOPF_COMPAT")]
    pub kopf_compat: bool,
    /// Where to keep handlers' progress on objects.
    #[arg(long, env = "BOSUN_STORAGE", value_enum, default_value = "auto")]
    pub storage: Storage,
    /// Where to keep the last handled configuration (the diffbase) on objects.
    #[arg(long, env = "BOSUN_DIFFBASE_STORAGE", value_enum, default_value = "annotations")]
    pub diffbase_storage: DiffbaseStorage,
    /// How many objects are processed at once (as many as API requests may be in flight:
    /// more cycles would only wait for those while holding their memory).
    #[arg(long, env = "BOSUN_MAX_WORKERS", default_value_t = 64)]
    pub max_workers: usize,
    /// End each watch request after this many seconds (server-side) and resume it from where
    /// it was; a watch silent 5 s longer is taken for stuck and reopened.
    #[arg(long, env = "BOSUN_INACTIVITY_TIMEOUT", default_value_t = 60)]
    pub inactivity_timeout: u64,
    /// Serve the liveness endpoint with probe results, e.g. http://0.0.0.0:8080/healthz.
    #[arg(short = 'L', long, env = "BOSUN_LIVENESS")]
    pub liveness: Option<String>,
    /// Serve Prometheus metrics at /metrics, with /healthz and /readyz (ready once every
    /// watch has listed), on this address, e.g. 0.0.0.0:9090 (port 0: any free port, logged).
    #[arg(long, env = "BOSUN_METRICS_LISTEN", value_name = "ADDR")]
    pub metrics_listen: Option<String>,
    /// Serve the admission webhooks on this address. Default, once validating or mutating
    /// handlers are registered: 0.0.0.0:9443 with --admission-service, else 127.0.0.1 on a
    /// free port (the dev cluster and a cluster on this machine reach it there).
    #[arg(long, env = "BOSUN_ADMISSION_LISTEN", value_name = "ADDR")]
    pub admission_listen: Option<String>,
    /// The URL the API server calls the webhooks at, when it is neither the Service nor the
    /// listen address: a tunnel, or this machine's address as the cluster sees it.
    #[arg(long, env = "BOSUN_ADMISSION_URL", value_name = "URL", conflicts_with = "admission_service")]
    pub admission_url: Option<String>,
    /// The Service in front of the controller's pod that the API server calls the webhooks
    /// through, NAMESPACE/NAME[:PORT] (port 443 unless given); the self-signed certificate
    /// names it.
    #[arg(long, env = "BOSUN_ADMISSION_SERVICE", value_name = "NAMESPACE/NAME[:PORT]", value_parser = parse_service)]
    pub admission_service: Option<(String, String, u16)>,
    /// The webhooks' serving certificate (a PEM chain), read again when it changes (as
    /// cert-manager rotates it); with --admission-key. Without: a self-signed one made at start.
    #[arg(long, env = "BOSUN_ADMISSION_CERT", value_name = "FILE", requires = "admission_key")]
    pub admission_cert: Option<PathBuf>,
    /// The private key of --admission-cert (PEM).
    #[arg(long, env = "BOSUN_ADMISSION_KEY", value_name = "FILE", requires = "admission_cert")]
    pub admission_key: Option<PathBuf>,
    /// The CA the webhook configurations' caBundle carries (default: --admission-cert's file).
    #[arg(long, env = "BOSUN_ADMISSION_CA", value_name = "FILE", requires = "admission_cert")]
    pub admission_ca: Option<PathBuf>,
    /// The name of the Validating- and MutatingWebhookConfiguration the controller keeps, and
    /// the suffix of their webhooks' names (Kopf's `settings.admission.managed`).
    #[arg(long, env = "BOSUN_ADMISSION_CONFIGURATION", value_name = "NAME", default_value = "auto.bosun.dev")]
    pub admission_configuration: String,
    /// Only serve the webhooks: the configurations are someone else's (a chart).
    #[arg(long, env = "BOSUN_ADMISSION_UNMANAGED")]
    pub admission_unmanaged: bool,
    /// Remove the webhook configurations when the controller stops cleanly (always so on the
    /// embedded dev cluster).
    #[arg(long, env = "BOSUN_ADMISSION_CLEANUP")]
    pub admission_cleanup: bool,
    /// Post no events at all, not even those handlers ask for (Kopf's `settings.posting.enabled`).
    #[arg(long, env = "BOSUN_NO_POSTING")]
    pub no_posting: bool,
    /// Post the log lines of objects' handling cycles as events about them too, the
    /// controller's and the handlers' (Kopf's `settings.posting.loggers`; off since Kopf 1.44).
    #[arg(long, env = "BOSUN_POSTING_LOGGERS")]
    pub posting_loggers: bool,
    /// The least level of the lines --posting-loggers posts (Kopf's `settings.posting.level`).
    #[arg(long, env = "BOSUN_POSTING_LEVEL", value_enum, default_value = "info", value_name = "LEVEL")]
    pub posting_level: PostingLevel,
    /// Logging (Kopf's flags).
    #[command(flatten)]
    pub log: crate::logging::LogArgs,
    /// The cluster.
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// The flags above given explicitly, on the command line or by their variable (filled by
    /// [`crate::Cli::note_explicit`]): startup handlers' settings do not override them.
    #[arg(skip)]
    pub explicit: BTreeSet<String>,
}

/// Which cluster.
#[derive(Debug, Args, Clone)]
pub struct ClusterArgs {
    /// Path to a kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster).
    #[arg(long, env = "BOSUN_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use.
    #[arg(long, env = "BOSUN_CONTEXT")]
    pub context: Option<String>,
    /// Give up an API request (then retried as its error says) when it has no complete answer
    /// after this many seconds; for a watch, when its response headers do not come in time.
    #[arg(long, env = "BOSUN_REQUEST_TIMEOUT", value_name = "SECONDS", default_value_t = bosun_controller::cluster::client::REQUEST_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub request_timeout: u64,
}

impl ClusterArgs {
    /// The same cluster for the handler server the controller starts.
    pub fn for_child(&self) -> std::io::Result<crate::supervise::ChildCluster> {
        Ok(crate::supervise::ChildCluster {
            kubeconfig: self.kubeconfig.clone().map(std::path::absolute).transpose()?,
            context: self.context.clone(),
        })
    }
}

/// `--shards`.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum Shards {
    /// As many shards as live replicas.
    Auto,
}

/// The namespace of Leases when none is given: the pod's (downward API or service account).
pub fn default_lease_namespace() -> String {
    std::env::var("POD_NAMESPACE")
        .ok()
        .filter(|ns| !ns.trim().is_empty())
        .or_else(|| std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace").ok())
        .map(|ns| ns.trim().to_string())
        .filter(|ns| !ns.is_empty())
        .unwrap_or_else(|| "default".into())
}

/// `bosun run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Controller flags.
    #[command(flatten)]
    pub controller: ControllerArgs,
    /// A handler server to start as a child.
    #[command(flatten)]
    pub server: crate::supervise::HandlerServerArgs,
}

/// `bosun dev`.
#[derive(Debug, Args)]
pub struct DevArgs {
    /// Manifests (files or directories) to apply once the cluster is up (repeatable).
    #[arg(long = "apply")]
    pub apply: Vec<PathBuf>,
    /// Where the dev cluster keeps its data and kubeconfig.
    #[arg(long, env = "BOSUN_DEV_DIR", default_value = ".bosun")]
    pub dir: PathBuf,
    /// Run only the dev cluster (and apply the manifests): no controller, no handler server.
    /// For clients and operators of your own, such as one embedded with `bosun.operator()`.
    #[arg(long, conflicts_with_all = ["files", "modules", "command", "handlers"])]
    pub cluster_only: bool,
    /// Serve the dev cluster over HTTPS with a CA of its own (kept in `--dir`); the
    /// kubeconfig carries the CA, and kubectl sends a token only over HTTPS.
    #[arg(long)]
    pub tls: bool,
    /// Print the least-privilege roles and bindings the handlers need (as `bosun rbac`, for
    /// the service account bosun-system/bosun) once the handler server is up, then exit.
    #[arg(long, conflicts_with = "cluster_only")]
    pub print_rbac: bool,
    /// Controller flags.
    #[command(flatten)]
    pub controller: ControllerArgs,
    /// A handler server to start as a child.
    #[command(flatten)]
    pub server: crate::supervise::HandlerServerArgs,
}

/// `--admission-service NAMESPACE/NAME[:PORT]`.
fn parse_service(s: &str) -> Result<(String, String, u16), String> {
    let (namespace, rest) = s.split_once('/').ok_or("give NAMESPACE/NAME[:PORT]")?;
    let (name, port) = match rest.split_once(':') {
        Some((name, port)) => (name, port.parse::<u16>().map_err(|_| format!("{port:?} is not a port number"))?),
        None => (rest, 443),
    };
    if namespace.is_empty() || name.is_empty() || port == 0 {
        return Err("give NAMESPACE/NAME[:PORT]".into());
    }
    Ok((namespace.to_string(), name.to_string(), port))
}

/// `--posting-level`: the flag's spelling of a log level.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum PostingLevel {
    /// Every line.
    Debug,
    /// Progress and above.
    Info,
    /// Warnings and errors.
    Warning,
    /// Errors only.
    Error,
}

impl From<PostingLevel> for Level {
    fn from(level: PostingLevel) -> Level {
        match level {
            PostingLevel::Debug => Level::Debug,
            PostingLevel::Info => Level::Info,
            PostingLevel::Warning => Level::Warn,
            PostingLevel::Error => Level::Error,
        }
    }
}

/// `--storage`: the flag's spelling of [`StorageMode`], which the library keeps free of clap.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Storage {
    /// In `status.<prefix>` when the resource's status subresource keeps unknown fields
    /// (a retry's progress travels with the results), else in annotations.
    Auto,
    /// Always in annotations.
    Annotations,
    /// In status where possible (same as auto).
    Status,
}

/// `--diffbase-storage`: where the last handled configuration is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DiffbaseStorage {
    /// In the annotation `<prefix>/last-handled-configuration` (Kopf's default): it survives
    /// losing the status; a cycle that stores it and writes results makes two writes.
    Annotations,
    /// In `status.<prefix>` where the status keeps unknown fields (Kopf's
    /// `StatusDiffBaseStorage`): one write per cycle, but a lost status re-runs create handlers.
    Status,
}

impl From<Storage> for StorageMode {
    fn from(storage: Storage) -> StorageMode {
        match storage {
            Storage::Auto => StorageMode::Auto,
            Storage::Annotations => StorageMode::Annotations,
            Storage::Status => StorageMode::Status,
        }
    }
}

impl ControllerArgs {
    /// The controller settings these flags say.
    pub fn settings(&self) -> Settings {
        Settings {
            handlers: self.handlers.clone(),
            namespaces: if self.namespaces.is_empty() { Namespaces::All } else { Namespaces::Patterns(self.namespaces.clone()) },
            prefix: self.prefix.clone(),
            kopf_compat: self.kopf_compat,
            storage: self.storage.into(),
            diffbase_in_status: self.diffbase_storage == DiffbaseStorage::Status,
            standalone: self.standalone,
            peering: bosun_controller::coordination::PeeringSetup {
                name: self.peering.clone().unwrap_or_else(|| "default".into()),
                mandatory: self.peering.is_some(),
                priority: if self.dev { bosun_controller::coordination::peering::DEV_PRIORITY } else { self.priority.unwrap_or(0) },
                lifetime: Duration::from_secs(self.peering_lifetime.max(1)),
            },
            identity: self.identity.clone(),
            replicas: {
                let lease = || bosun_controller::coordination::LeaseSetup {
                    name: self.lease_name.clone(),
                    namespace: self.lease_namespace.clone().unwrap_or_else(default_lease_namespace),
                    duration: Duration::from_secs(self.lease_duration.max(1)),
                };
                match (self.leader_election, self.shards) {
                    (true, _) => bosun_controller::coordination::Replicas::LeaderElection(lease()),
                    (false, Some(Shards::Auto)) => bosun_controller::coordination::Replicas::Shards(lease()),
                    (false, None) => bosun_controller::coordination::Replicas::Each,
                }
            },
            max_workers: self.max_workers,
            inactivity_timeout: Duration::from_secs(self.inactivity_timeout.max(1)),
            log_sink: None,
            liveness: self.liveness.clone(),
            metrics_listen: self.metrics_listen.clone(),
            admission: bosun_controller::endpoints::admission::Setup {
                listen: self.admission_listen.clone(),
                url: self.admission_url.clone(),
                host: None,
                service: self.admission_service.clone(),
                certificate: match (&self.admission_cert, &self.admission_key) {
                    (Some(cert), Some(key)) => Certificate::Files { cert: cert.clone(), key: key.clone(), ca: self.admission_ca.clone() },
                    _ => Certificate::SelfSigned,
                },
                configuration: self.admission_configuration.clone(),
                manage: !self.admission_unmanaged,
                cleanup: self.admission_cleanup,
                // Requests in the controller's own namespace are not reviewed.
                own_namespace: self
                    .admission_service
                    .as_ref()
                    .map(|(ns, _, _)| ns.clone())
                    .or_else(|| std::env::var("POD_NAMESPACE").ok().filter(|ns| !ns.trim().is_empty())),
                // `bosun dev` on a cluster others use sets it.
                dev: false,
            },
            posting: Posting { enabled: !self.no_posting, loggers: self.posting_loggers, level: self.posting_level.into() },
            persistence: Default::default(),
            explicit: self.explicit.clone(),
            clock: bosun_controller::clock::Clock::Wall,
        }
    }

    /// A client for the cluster these flags name.
    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        self.cluster.client().await
    }

    /// Whether a cluster was named explicitly.
    pub fn names_a_cluster(&self) -> bool {
        self.cluster.kubeconfig.is_some() || self.cluster.context.is_some()
    }
}

impl ClusterArgs {
    /// A client for the cluster these flags name.
    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        use kube::config::{KubeConfigOptions, Kubeconfig};
        let options = KubeConfigOptions { context: self.context.clone(), ..Default::default() };
        let config = match &self.kubeconfig {
            Some(path) => kube::Config::from_custom_kubeconfig(Kubeconfig::read_from(path)?, &options).await?,
            None if self.context.is_some() => kube::Config::from_kubeconfig(&options).await?,
            None => kube::Config::infer().await?,
        };
        Ok(bosun_controller::cluster::client::build(config, &self.networking())?)
    }

    /// How requests are bounded.
    pub fn networking(&self) -> bosun_controller::cluster::client::Networking {
        let request_timeout = std::time::Duration::from_secs(self.request_timeout);
        bosun_controller::cluster::client::Networking { request_timeout, ..Default::default() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Cli, Command};
    use clap::{CommandFactory, FromArgMatches, Parser};

    #[test]
    fn flags_given_on_the_command_line_are_explicit_and_defaults_are_not() {
        let args = ["bosun", "run", "--handler", "http://127.0.0.1:1", "--max-workers", "5", "--standalone", "--posting-level", "error"];
        let matches = Cli::command().try_get_matches_from(args).unwrap();
        let mut cli = Cli::from_arg_matches(&matches).unwrap();
        cli.note_explicit(&matches);
        let Command::Run(run) = cli.command else { panic!("run") };
        let explicit: Vec<&str> = run.controller.explicit.iter().map(String::as_str).collect();
        assert_eq!(explicit, ["--handler", "--max-workers", "--posting-level", "--standalone"]);
        assert_eq!(run.controller.settings().explicit, run.controller.explicit);
    }

    /// Kopf's `kopf run` flags, as Kopf's own tests pass them, parsed into the controller's.
    #[test]
    fn kopf_runs_flags_are_taken() {
        use crate::logging::{LogFormat, Verbosity};
        /// The flags after `bosun run`, and what they say: verbosity, prefix, refkey, peering,
        /// priority, standalone, all namespaces.
        type Case<'a> = (&'a [&'a str], (Verbosity, bool, &'a str, Option<&'a str>, Option<i64>, bool, bool));
        let cases: [Case; 9] = [
            (&["--all-namespaces", "--verbose", "--standalone", "example.py"], (Verbosity::Debug, true, "object", None, None, true, true)),
            (&["-A", "-d", "--standalone"], (Verbosity::Debug, true, "object", None, None, true, true)),
            (&["-q"], (Verbosity::Quiet, true, "object", None, None, false, false)),
            (&["--quiet", "--debug"], (Verbosity::Debug, true, "object", None, None, false, false)),
            (&["--no-log-prefix"], (Verbosity::Normal, false, "object", None, None, false, false)),
            (&["--log-format", "json"], (Verbosity::Normal, false, "object", None, None, false, false)),
            (&["--log-format", "json", "--log-prefix", "--log-refkey", "k8s"], (Verbosity::Normal, true, "k8s", None, None, false, false)),
            (&["--log-prefix", "--no-log-prefix"], (Verbosity::Normal, false, "object", None, None, false, false)),
            (&["-P", "team", "-p", "-5"], (Verbosity::Normal, true, "object", Some("team"), Some(-5), false, false)),
        ];
        for (flags, (verbosity, prefix, refkey, peering, priority, standalone, all)) in cases {
            let args: Vec<&str> = ["bosun", "run"].iter().chain(flags).copied().collect();
            let cli = Cli::try_parse_from(&args).unwrap_or_else(|e| panic!("{flags:?}: {e}"));
            let Command::Run(run) = cli.command else { panic!("run") };
            let c = &run.controller;
            let style = c.log.style();
            assert_eq!(c.log.verbosity(), verbosity, "{flags:?}");
            assert_eq!((style.prefix, style.refkey.as_str()), (prefix, refkey), "{flags:?}");
            assert_eq!(
                (c.peering.as_deref(), c.priority, c.standalone, c.all_namespaces),
                (peering, priority, standalone, all),
                "{flags:?}"
            );
            assert_eq!(style.format == LogFormat::Json, flags.contains(&"json"), "{flags:?}");
        }
    }

    #[test]
    fn admission_services_are_read_with_a_default_port() {
        /// The flag, and the namespace, name and port read or the error.
        type Case<'a> = (&'a str, Result<(&'a str, &'a str, u16), &'a str>);
        let cases: [Case; 6] = [
            ("ops/bosun", Ok(("ops", "bosun", 443))),
            ("ops/bosun:8443", Ok(("ops", "bosun", 8443))),
            ("bosun", Err("give NAMESPACE/NAME[:PORT]")),
            ("/bosun", Err("give NAMESPACE/NAME[:PORT]")),
            ("ops/bosun:0", Err("give NAMESPACE/NAME[:PORT]")),
            ("ops/bosun:https", Err("\"https\" is not a port number")),
        ];
        for (flag, want) in cases {
            let want = want.map(|(ns, name, port)| (ns.to_string(), name.to_string(), port)).map_err(String::from);
            assert_eq!(parse_service(flag), want, "{flag}");
        }
    }
}
