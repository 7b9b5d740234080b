//! The harness of the contract conformance suite (`tests/conformance/README.md`): one SDK's
//! conformance server as a real process on a loopback port, the dev cluster in-process over
//! HTTP, and the real controller between them; plus the waits the scenarios
//! (`tests/tests/conformance.rs`) check outcomes with. Every SDK's server is started the same
//! way, as a child process speaking gRPC, so that the scenarios cannot tell them apart except
//! by what they answer.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bosun_controller::Settings;
use bosun_controller::cluster::Cluster;
use bosun_devcluster::DevCluster;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::{Controller, kex, tools, wait_for};

/// How long any one condition of a scenario may take to come true.
pub const DEADLINE: Duration = Duration::from_secs(30);
/// The namespace every scenario's objects live in (each scenario has a dev cluster of its own).
pub const NS: &str = "default";

/// An SDK under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sdk {
    /// `sdk-rust/`, server `tests/conformance/rust/server.rs` (binary `conformance-server`).
    Rust,
    /// `sdk-python/`, server `tests/conformance/python/server.py`.
    Python,
    /// `sdk-go/`, server `tests/conformance/go/main.go`, built once per test process.
    Go,
    /// `sdk-typescript/`, server `tests/conformance/typescript/server.ts`.
    TypeScript,
}

impl Sdk {
    /// Its name in logs.
    pub fn name(self) -> &'static str {
        match self {
            Sdk::Rust => "rust",
            Sdk::Python => "python",
            Sdk::Go => "go",
            Sdk::TypeScript => "typescript",
        }
    }
}

/// The workspace's root folder.
pub fn workspace_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// How to start a conformance server; it must listen where `BOSUN_LISTEN` says.
#[derive(Debug, Clone)]
pub struct ServerCommand {
    program: PathBuf,
    args: Vec<String>,
}

impl ServerCommand {
    /// A server that is one executable (the Rust SDK's, a Go or Node binary…).
    pub fn executable(program: impl Into<PathBuf>) -> ServerCommand {
        ServerCommand { program: program.into(), args: Vec::new() }
    }

    /// The Python SDK's server, `python -m bosun tests/conformance/python/server.py`, with the
    /// Python of [`sdk_python`]; `None` (after [`tools::require_tool`]: a failure under CI, a
    /// skip elsewhere) when there is none.
    pub fn python() -> Option<ServerCommand> {
        let found = sdk_python();
        let what = "a Python with the bosun SDK (BOSUN_SDK_PYTHON, or the README's .venv: \
                    python3 -m venv .venv && .venv/bin/pip install './sdk-python[test]')";
        if !tools::require_tool(what, found.is_some()) {
            return None;
        }
        let server = workspace_dir().join("tests/conformance/python/server.py");
        let args = vec!["-m".into(), "bosun".into(), server.display().to_string()];
        Some(ServerCommand { program: found?.clone(), args })
    }

    /// The TypeScript SDK's server, `node sdk-typescript/dist/cli.js
    /// tests/conformance/typescript/server.ts`, with the node of [`sdk_node`]; `None` (after
    /// [`tools::require_tool`]) when node, the built SDK or the server's `node_modules` is missing.
    pub fn typescript() -> Option<ServerCommand> {
        let root = workspace_dir();
        let cli = root.join("sdk-typescript/dist/cli.js");
        let installed = root.join("tests/conformance/typescript/node_modules/bosun-operator/package.json");
        let found = sdk_node().filter(|_| cli.is_file() && installed.is_file());
        let what = "node (BOSUN_NODE, or node on PATH) with the TypeScript SDK built and the conformance \
                    server's dependencies installed (cd sdk-typescript && npm ci && npm run build; \
                    cd tests/conformance/typescript && npm ci)";
        if !tools::require_tool(what, found.is_some()) {
            return None;
        }
        let server = root.join("tests/conformance/typescript/server.ts");
        let args = vec![cli.display().to_string(), server.display().to_string()];
        Some(ServerCommand { program: found?.clone(), args })
    }
}

/// The node that runs the TypeScript SDK: `BOSUN_NODE`, else `node` on `PATH`; only if
/// `node --version` runs.
pub fn sdk_node() -> Option<&'static PathBuf> {
    static FOUND: OnceLock<Option<PathBuf>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            let candidate = match std::env::var_os("BOSUN_NODE").filter(|v| !v.is_empty()) {
                Some(node) => PathBuf::from(node),
                None => PathBuf::from("node"),
            };
            runs(std::process::Command::new(&candidate).arg("--version")).then_some(candidate)
        })
        .as_ref()
}

impl ServerCommand {
    /// The Go SDK's server, built once per test process by [`go_server`]; `None` (after
    /// [`tools::require_tool`]: a failure under CI, a skip elsewhere) when it cannot be built.
    pub fn go() -> Option<ServerCommand> {
        match go_server() {
            Ok(server) => Some(ServerCommand::executable(server)),
            Err(GoBuild::Missing(what)) => {
                tools::require_tool(what, false);
                None
            }
            Err(GoBuild::Failed(why)) => panic!("{why}"),
        }
    }
}

/// Why the Go conformance server is not there.
#[derive(Debug)]
pub enum GoBuild {
    /// A tool it needs is missing (a skip locally, a failure under CI).
    Missing(String),
    /// Its build failed (always a failure).
    Failed(String),
}

/// The Go conformance server, built once per test process into `target/go/conformance-server`:
/// `go generate ./...` in `sdk-go/` (the contract's code, with Debian's `protoc`; skipped while
/// the generated files are newer than their sources), then
/// `go build` in `tests/conformance/go/`. `BOSUN_GO_CONFORMANCE_SERVER` names a server built
/// beforehand instead. The Go toolchain is `BOSUN_GO`, else `go` on the `PATH`, else
/// `/usr/local/go/bin/go`. `Err` says what is missing.
pub fn go_server() -> &'static Result<PathBuf, GoBuild> {
    static BUILT: OnceLock<Result<PathBuf, GoBuild>> = OnceLock::new();
    BUILT.get_or_init(|| {
        if let Some(server) = std::env::var_os("BOSUN_GO_CONFORMANCE_SERVER").filter(|v| !v.is_empty()) {
            let server = PathBuf::from(server);
            return if server.is_file() {
                Ok(server)
            } else {
                Err(GoBuild::Missing(format!("the Go conformance server {} (BOSUN_GO_CONFORMANCE_SERVER)", server.display())))
            };
        }
        let go = match std::env::var_os("BOSUN_GO").filter(|v| !v.is_empty()) {
            Some(go) => PathBuf::from(go),
            None if runs(std::process::Command::new("go").arg("version")) => PathBuf::from("go"),
            None => PathBuf::from("/usr/local/go/bin/go"),
        };
        if !runs(std::process::Command::new(&go).arg("version")) {
            return Err(GoBuild::Missing("the Go toolchain (BOSUN_GO, `go` on the PATH or /usr/local/go/bin/go)".into()));
        }
        let root = workspace_dir();
        let server = root.join("target/go/conformance-server");
        if !generated_is_fresh(&root) {
            if !runs(std::process::Command::new("protoc").arg("--version")) {
                return Err(GoBuild::Missing("protoc, for the Go SDK's generated code (apt-get install protobuf-compiler)".into()));
            }
            let mut generate = std::process::Command::new(&go);
            generate.args(["generate", "./..."]).current_dir(root.join("sdk-go"));
            succeeds("go generate ./... in sdk-go", &mut generate)?;
        }
        let mut build = std::process::Command::new(&go);
        build.arg("build").arg("-o").arg(&server).arg(".").current_dir(root.join("tests/conformance/go"));
        succeeds("go build in tests/conformance/go", &mut build)?;
        Ok(server)
    })
}

/// Whether the Go SDK's generated code is newer than what it is generated from (the proto, the
/// generate directives, the pinned plugins in go.mod): then `go generate` is not run again, so
/// that a test process does not rewrite files another build may be reading.
fn generated_is_fresh(root: &std::path::Path) -> bool {
    let modified = |path: &str| std::fs::metadata(root.join(path)).and_then(|m| m.modified()).ok();
    let generated = ["sdk-go/proto/bosunv1/handler.pb.go", "sdk-go/proto/bosunv1/handler_grpc.pb.go"].map(modified);
    let sources = ["proto/bosun/v1/handler.proto", "sdk-go/proto/bosunv1/generate.go", "sdk-go/go.mod"].map(modified);
    let oldest = generated.iter().copied().collect::<Option<Vec<_>>>().and_then(|g| g.into_iter().min());
    let newest = sources.iter().copied().collect::<Option<Vec<_>>>().and_then(|s| s.into_iter().max());
    matches!((oldest, newest), (Some(g), Some(s)) if g > s)
}

/// Runs one step of building the Go server; `Err` with its output when it fails.
fn succeeds(step: &str, command: &mut std::process::Command) -> Result<(), GoBuild> {
    match command.output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(GoBuild::Failed(format!("the Go conformance server: {step} failed:\n{}", String::from_utf8_lossy(&o.stderr)))),
        Err(e) => Err(GoBuild::Failed(format!("the Go conformance server: {step} did not run: {e}"))),
    }
}

/// Whether a command runs and succeeds (its output discarded).
fn runs(command: &mut std::process::Command) -> bool {
    command.stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
}

/// The Python that has the SDK installed: `BOSUN_SDK_PYTHON`, else the workspace's
/// `.venv/bin/python`; only if `import bosun.v1.handler_pb2` (the generated stubs) works there.
pub fn sdk_python() -> Option<&'static PathBuf> {
    static FOUND: OnceLock<Option<PathBuf>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            let candidate = match std::env::var_os("BOSUN_SDK_PYTHON").filter(|v| !v.is_empty()) {
                Some(python) => PathBuf::from(python),
                None => workspace_dir().join(".venv/bin/python"),
            };
            runs(std::process::Command::new(&candidate).args(["-c", "import bosun.v1.handler_pb2"])).then_some(candidate)
        })
        .as_ref()
}

/// A conformance server running as a child process; its stdout and stderr lines are kept.
pub struct Server {
    url: String,
    sdk: Sdk,
    command: ServerCommand,
    child: Child,
    /// Its lines, each with when the harness read it.
    output: Arc<Mutex<Vec<(tokio::time::Instant, String)>>>,
}

impl Server {
    /// Starts the server on a free loopback port and waits until its gRPC health says SERVING.
    /// A server that exits first (another test took the port meanwhile) is started again on
    /// another port, twice at most.
    pub async fn start(sdk: Sdk, command: &ServerCommand) -> Server {
        Server::start_on(sdk, command, None, &[], Arc::default()).await
    }

    /// [`Server::start`], on `port` when given (once: the port is the one a controller knows),
    /// its lines kept in `output`.
    async fn start_on(
        sdk: Sdk,
        command: &ServerCommand,
        port: Option<u16>,
        env: &[(&str, &str)],
        output: Arc<Mutex<Vec<(tokio::time::Instant, String)>>>,
    ) -> Server {
        let mut last_exit = String::new();
        for _ in 0..if port.is_some() { 1 } else { 3 } {
            let port = port
                .unwrap_or_else(|| std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port());
            let listen = format!("127.0.0.1:{port}");
            let mut child = Command::new(&command.program)
                .args(&command.args)
                .current_dir(workspace_dir())
                .env("BOSUN_LISTEN", &listen)
                .env("PYTHONUNBUFFERED", "1")
                .envs(env.iter().copied())
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start the {} conformance server {}: {e}", sdk.name(), command.program.display()));
            let tag = format!("[{} server]", sdk.name());
            if let Some(out) = child.stdout.take() {
                tokio::spawn(collect(out, tag.clone(), output.clone()));
            }
            if let Some(err) = child.stderr.take() {
                tokio::spawn(collect(err, tag, output.clone()));
            }
            let url = format!("http://{listen}");
            match serving(&url, &mut child).await {
                Ok(()) => return Server { url, sdk, command: command.clone(), child, output },
                Err(why) => last_exit = format!("{why}; its output:\n{}", lines(&output.lock().unwrap()).join("\n")),
            }
        }
        panic!("the {} conformance server did not start: {last_exit}", sdk.name());
    }

    /// Where it listens, for the controller (`http://127.0.0.1:PORT`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Its output lines so far (stdout and stderr).
    pub fn output(&self) -> Vec<String> {
        lines(&self.output.lock().unwrap())
    }

    /// When the first line of its output that contains `text` was read, if one was.
    pub fn output_at(&self, text: &str) -> Option<tokio::time::Instant> {
        self.output.lock().unwrap().iter().find(|(_, l)| l.contains(text)).map(|(at, _)| *at)
    }

    /// Waits until a line of its output contains `text`.
    pub async fn wait_output(&self, text: &str) {
        let output = self.output.clone();
        wait_for(&format!("the server's output to contain {text:?}"), DEADLINE, || {
            let found = output.lock().unwrap().iter().any(|(_, l)| l.contains(text));
            async move { found }
        })
        .await
        .unwrap_or_else(|e| panic!("{e}; its output:\n{}", self.output().join("\n")));
    }

    /// Waits until the process has exited by itself (a handler ended it), then starts the
    /// server again on the same port; the lines of both are kept.
    pub async fn restart_after_its_exit(&mut self) {
        let exited = tokio::time::timeout(DEADLINE, self.child.wait()).await;
        if !matches!(exited, Ok(Ok(_))) {
            panic!("the {} conformance server did not exit: {exited:?}; its output:\n{}", self.sdk.name(), self.output().join("\n"));
        }
        self.start_again(&[]).await;
    }

    /// Ends the process (SIGKILL) and starts the server again on the same port with `env` added
    /// to its environment (`CONFORMANCE_EXTRA`: a changed registry).
    pub async fn restart_with(&mut self, env: &[(&str, &str)]) {
        let _ = self.child.kill().await;
        self.start_again(env).await;
    }

    async fn start_again(&mut self, env: &[(&str, &str)]) {
        let port: u16 = self.url.rsplit(':').next().and_then(|p| p.parse().ok()).expect("the server's URL has a port");
        self.child = Server::start_on(self.sdk, &self.command, Some(port), env, self.output.clone()).await.child;
    }

    /// Ends the process (SIGKILL) and waits for it.
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// Keeps the lines of one of the server's streams, and shows them when the test fails.
async fn collect(stream: impl tokio::io::AsyncRead + Unpin, tag: String, into: Arc<Mutex<Vec<(tokio::time::Instant, String)>>>) {
    let mut lines = BufReader::new(stream).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        eprintln!("{tag} {line}");
        into.lock().unwrap().push((tokio::time::Instant::now(), line));
    }
}

/// The lines alone.
fn lines(output: &[(tokio::time::Instant, String)]) -> Vec<String> {
    output.iter().map(|(_, l)| l.clone()).collect()
}

/// Waits until the server at `url` is SERVING; `Err` when it exits first or takes too long.
async fn serving(url: &str, child: &mut Child) -> Result<(), String> {
    use tonic_health::pb::health_check_response::ServingStatus;
    let deadline = tokio::time::Instant::now() + DEADLINE;
    // The controller's own client of a handler server, and its health check.
    let server = bosun_controller::handlers::dispatch::Server::new(url).map_err(|e| e.to_string())?;
    loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            return Err(format!("it exited ({status})"));
        }
        if matches!(server.health_check().await, Ok(ServingStatus::Serving)) {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!("it was not SERVING on {url} after {DEADLINE:?}"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One scenario's world: a dev cluster with the KopfExample CRD, one SDK's conformance
/// server, and the controller between them.
pub struct Env {
    /// The SDK under test.
    pub sdk: Sdk,
    /// A client of the dev cluster.
    pub client: kube::Client,
    /// The conformance server.
    pub server: Server,
    controller: Option<Controller>,
    settings: Settings,
    _cluster: DevCluster,
}

impl Env {
    /// Starts everything; the controller gets `settings` with the server as its only handler
    /// server.
    pub async fn start(sdk: Sdk, command: &ServerCommand, mut settings: Settings) -> Env {
        let cluster = DevCluster::start_local().await.expect("the dev cluster starts");
        let client = cluster.client();
        kex::install_crd(&client).await;
        let server = Server::start(sdk, command).await;
        settings.handlers = vec![server.url().to_string()];
        let controller = Some(Controller::start(client.clone(), settings.clone()));
        Env { sdk, client, server, controller, settings, _cluster: cluster }
    }

    /// The running controller.
    pub fn controller(&self) -> &Controller {
        self.controller.as_ref().expect("the controller runs")
    }

    /// Stops the controller (as on SIGTERM: cleanup activities run) and returns its log.
    pub async fn stop_controller(&mut self) -> Vec<String> {
        let controller = self.controller.take().expect("the controller runs");
        let log = controller.log_handle();
        controller.stop().await;
        log.lock().unwrap().clone()
    }

    /// Starts a new controller with the same settings (after [`stop_controller`](Self::stop_controller)).
    pub fn start_controller(&mut self) {
        assert!(self.controller.is_none(), "a controller runs already");
        self.controller = Some(Controller::start(self.client.clone(), self.settings.clone()));
    }

    /// Starts another replica beside the controller: its settings with `identity` instead.
    pub fn start_replica(&self, identity: &str) -> Controller {
        Controller::start(self.client.clone(), Settings { identity: Some(identity.into()), ..self.settings.clone() })
    }

    /// Waits until a line of the controller's log contains `text`.
    pub async fn wait_log(&self, text: &str) {
        self.controller().wait_log(text, DEADLINE).await;
    }

    /// Creates a KopfExample named `name` with `spec.field: value`, merged with `extra`.
    pub async fn create(&self, name: &str, extra: Value) -> Value {
        kex::create(&self.client, NS, name, extra).await
    }

    /// Merge-patches the KopfExample `name`.
    pub async fn patch(&self, name: &str, patch: Value) -> Value {
        kex::patch(&self.client, NS, name, patch).await
    }

    /// Deletes the KopfExample `name` (its finalizers may keep it for a while).
    pub async fn delete(&self, name: &str) {
        kex::delete(&self.client, NS, name).await;
    }

    /// Waits until the KopfExample `name` exists and `cond` holds for it; returns it.
    pub async fn wait_object(&self, name: &str, what: &str, cond: impl Fn(&Value) -> bool) -> Value {
        let path = format!("{}/{name}", kex::path(NS));
        self.wait_get(&path, what, |o| o.as_ref().is_some_and(&cond)).await.expect("only an existing object matches")
    }

    /// Waits until the KopfExample `name` is gone.
    pub async fn wait_gone(&self, name: &str) {
        let path = format!("{}/{name}", kex::path(NS));
        self.wait_get(&path, &format!("{name} to be gone"), Option::is_none).await;
    }

    /// Waits until the object at the API path `path` (`None`: absent) satisfies `cond`.
    pub async fn wait_get(&self, path: &str, what: &str, cond: impl Fn(&Option<Value>) -> bool) -> Option<Value> {
        let cluster = Cluster::new(self.client.clone());
        let deadline = tokio::time::Instant::now() + DEADLINE;
        loop {
            let seen = match cluster.get(path).await {
                Ok(v) => Some(v),
                Err(e) if e.code() == Some(404) => None,
                Err(e) => panic!("GET {path} failed: {e}"),
            };
            if cond(&seen) {
                return seen;
            }
            if tokio::time::Instant::now() >= deadline {
                self.fail(&format!("timed out after {DEADLINE:?} waiting for {what}; last seen: {:#}", seen.unwrap_or(Value::Null)));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until there are Kubernetes Events about the object with this uid for which `cond`
    /// holds; returns all events about it.
    pub async fn wait_events(&self, uid: &str, what: &str, cond: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let path = format!("/api/v1/namespaces/{NS}/events");
        let about = |list: &Option<Value>| -> Vec<Value> {
            let items = list.as_ref().and_then(|l| l["items"].as_array().cloned()).unwrap_or_default();
            items.into_iter().filter(|e| e["involvedObject"]["uid"] == json!(uid)).collect()
        };
        let list = self.wait_get(&path, what, |list| cond(&about(list))).await;
        about(&list)
    }

    /// Panics with `message`, the controller's log and the server's output.
    pub fn fail(&self, message: &str) -> ! {
        let log = self.controller.as_ref().map(|c| c.log().join("\n")).unwrap_or_default();
        panic!(
            "[{} SDK] {message}\n--- the controller's log:\n{log}\n--- the server's output:\n{}",
            self.sdk.name(),
            self.server.output().join("\n")
        );
    }

    /// Stops the controller, then the server.
    pub async fn stop(mut self) {
        if let Some(controller) = self.controller.take() {
            controller.stop().await;
        }
        self.server.stop().await;
    }
}
