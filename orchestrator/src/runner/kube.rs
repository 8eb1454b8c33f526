//! The Kubernetes runner: pod exec through the API server (kube-rs, WebSocket).
//!
//! Exit statuses come from the exec's status channel, as kubectl reads them: `status ==
//! "Success"` is exit code 0; otherwise `reason == "NonZeroExitCode"` carries the code in
//! `details.causes[reason == "ExitCode"].message`; any other failure (no such container, the
//! program cannot be started) is an [`Exit::Error`] with the status message.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use kube::api::AttachParams;
use kube::client::ClientBuilder;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::Semaphore;

use super::exec::{self, ExecStream};
use super::retry::RetryAfterLayer;
use super::timeout::RequestTimeoutLayer;
use super::{
    bounded, kill_argv, spawn_trampoline, take_pid_line, Exit, Output, Piped, PodInfo, Runner,
    Signal, Spawned, StartTurn,
};

/// Where the API server is and which namespace and container to use: resolved like kubectl
/// (`--kubeconfig`, else `KUBECONFIG`, else `~/.kube/config`, else the in-cluster service
/// account; `--context`, else the current context; `--namespace`, else the context's namespace,
/// else `default`).
#[derive(Debug, Clone, Default)]
pub struct KubeTarget {
    /// `--kubeconfig`.
    pub kubeconfig: Option<PathBuf>,
    /// `--context`.
    pub context: Option<String>,
    /// `--cluster`: the kubeconfig's cluster to use instead of the context's, as kubectl's.
    pub cluster: Option<String>,
    /// `--namespace`.
    pub namespace: Option<String>,
    /// `--container`; `None` takes the pod's default container.
    pub container: Option<String>,
    /// `--request-timeout`: how long one request waits for the API server's answer (`None`:
    /// as long as it takes).
    pub request_timeout: Option<Duration>,
}

/// Runs commands in pods through the Kubernetes API.
#[derive(Clone)]
pub struct KubeRunner {
    pods: Api<Pod>,
    namespace: String,
    cluster: String,
    container: Option<String>,
    /// The API server's URL, when railsweep resolved the configuration itself.
    server: Option<String>,
    /// Turns to start a process: [`START_TURNS`] exec streams opened at once.
    starts: Arc<Semaphore>,
    /// How long an answered exec stream may run: [`EXEC_STREAM_LIMIT`].
    stream_limit: Duration,
}

/// Processes started at once ([`Runner::start_turn`]). A round of 1,024 nodes started 1,024
/// exec streams at once, and on 2 cores some of them took longer than a rail's deadline to
/// start a process (docs/fleet.md, "Exec streams"); each start takes a fraction of a second.
pub const START_TURNS: usize = 64;

/// How long an exec's stream may run once the API server answered it, for the commands that
/// `exec` runs (set-up's reads, the copy of `--inject`, a signal): an answered stream is never
/// cut by `--request-timeout`, and one whose node stopped answering mid-way (an emulated node
/// that hung in the lab) was awaited for ever, railsweep with it. A minute, and a second more
/// per [`EXEC_INPUT_RATE`] bytes it carries in; the tests' processes (`spawn`, `start`) have
/// their rails' deadlines instead.
pub const EXEC_STREAM_LIMIT: Duration = Duration::from_secs(60);

/// The slowest copy into a pod that is still taken for a working one: 100 kB a second.
pub const EXEC_INPUT_RATE: u64 = 100_000;

/// `limit` for an exec that carries `input` bytes in.
fn with_input(limit: Duration, input: usize) -> Duration {
    limit + Duration::from_secs(input as u64 / EXEC_INPUT_RATE)
}

impl std::fmt::Debug for KubeRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeRunner")
            .field("namespace", &self.namespace)
            .field("cluster", &self.cluster)
            .field("container", &self.container)
            .finish_non_exhaustive()
    }
}

/// The cluster name a kubeconfig's context (given, or current) points at.
fn cluster_name(kc: &Kubeconfig, context: Option<&str>) -> Option<String> {
    let ctx = context.or(kc.current_context.as_deref())?;
    kc.contexts
        .iter()
        .find(|c| c.name == ctx)
        .and_then(|c| c.context.as_ref())
        .map(|c| c.cluster.clone())
}

/// The files `KUBECONFIG` names (empty names skipped), in order.
fn kubeconfig_paths(value: Option<&std::ffi::OsStr>) -> Vec<PathBuf> {
    value
        .map(|v| {
            std::env::split_paths(v)
                .filter(|p| !p.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// Where [`read_kubeconfig`] looked, for an error that found nothing.
fn kubeconfig_places(value: Option<std::ffi::OsString>) -> String {
    let paths = kubeconfig_paths(value.as_deref());
    if paths.is_empty() {
        "KUBECONFIG unset, no ~/.kube/config".to_string()
    } else {
        let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        format!("KUBECONFIG={}: no such file", names.join(":"))
    }
}

/// The kubeconfig as kubectl reads it, from the value of `KUBECONFIG`: the files it lists that
/// exist, merged by kubectl's rules (a listed file that does not exist is skipped, as kubectl
/// skips it); without `KUBECONFIG`, `~/.kube/config`. `None` when there is no file to read; a
/// file that exists but does not parse is an error naming it.
fn read_kubeconfig(value: Option<std::ffi::OsString>) -> Result<Option<Kubeconfig>> {
    let mut paths = kubeconfig_paths(value.as_deref());
    if paths.is_empty() {
        paths.extend(
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".kube").join("config")),
        );
    }
    let mut merged: Option<Kubeconfig> = None;
    for path in paths.iter().filter(|p| p.exists()) {
        let kc = Kubeconfig::read_from(path)
            .with_context(|| format!("cannot read kubeconfig {}", path.display()))?;
        merged = Some(match merged {
            None => kc,
            Some(m) => m
                .merge(kc)
                .with_context(|| format!("cannot merge kubeconfig {}", path.display()))?,
        });
    }
    Ok(merged)
}

/// The client of `config`, each request given up after `request_timeout`
/// ([`super::timeout`]). kube-rs's own retries of a 503 (15, backing off to minutes) are off:
/// kubectl does not retry a 503 without Retry-After, and they made one DELETE take minutes
/// with nothing said (issue 56). What kubectl does retry, an answer with Retry-After (API
/// Priority and Fairness's 429), is sent again after its wait ([`super::retry`]), within the
/// request's timeout.
fn client_of(mut config: Config, request_timeout: Option<Duration>) -> Result<Client> {
    config.default_retry = false;
    let builder = ClientBuilder::try_from(config)
        .context("cannot build a Kubernetes client")?
        .with_layer(&RetryAfterLayer);
    Ok(match request_timeout {
        Some(limit) => builder.with_layer(&RequestTimeoutLayer(limit)).build(),
        None => builder.build(),
    })
}

impl KubeRunner {
    /// [`KubeRunner::connect`], then say on stderr which cluster and namespace it reached.
    pub async fn connect_announced(target: &KubeTarget) -> Result<Self> {
        let runner = Self::connect(target).await?;
        // The server is named: an error that says the API server cannot be reached then
        // says which one.
        results::say!(
            "railsweep: cluster {}, namespace {}{}",
            runner.cluster(),
            runner.namespace(),
            runner
                .server
                .as_ref()
                .filter(|s| **s != runner.cluster())
                .map(|s| format!(", API server {s}"))
                .unwrap_or_default()
        );
        Ok(runner)
    }

    /// Resolve the configuration like kubectl and build a client.
    pub async fn connect(target: &KubeTarget) -> Result<Self> {
        let options = KubeConfigOptions {
            context: target.context.clone(),
            cluster: target.cluster.clone(),
            ..KubeConfigOptions::default()
        };
        let kubeconfig = match &target.kubeconfig {
            Some(path) => Some(
                Kubeconfig::read_from(path)
                    .with_context(|| format!("cannot read kubeconfig {}", path.display()))?,
            ),
            None => match read_kubeconfig(std::env::var_os("KUBECONFIG"))? {
                Some(kc) => Some(kc),
                // No kubeconfig: kubectl falls back to the pod's service account.
                None if target.context.is_none()
                    && target.cluster.is_none()
                    && std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() =>
                {
                    None
                }
                None => bail!(
                    "no kubeconfig found ({}) and not inside a cluster: give --kubeconfig FILE \
                     or set KUBECONFIG",
                    kubeconfig_places(std::env::var_os("KUBECONFIG"))
                ),
            },
        };
        let (config, cluster) = match kubeconfig {
            Some(kc) => {
                if let Some(want) = &target.cluster {
                    let names: Vec<&str> = kc.clusters.iter().map(|c| c.name.as_str()).collect();
                    if !names.contains(&want.as_str()) {
                        bail!(
                            "--cluster {want}: the kubeconfig has no cluster of that name (it has {}); \
                             --cluster picks the kubeconfig's cluster, as kubectl's does. To name \
                             the cluster in the rows, give --cluster-label {want}",
                            if names.is_empty() { "none".to_string() } else { names.join(", ") }
                        );
                    }
                }
                let name = target
                    .cluster
                    .clone()
                    .or_else(|| cluster_name(&kc, target.context.as_deref()));
                let config = Config::from_custom_kubeconfig(kc, &options)
                    .await
                    .context("cannot use the kubeconfig")?;
                let name = name.unwrap_or_else(|| config.cluster_url.to_string());
                (config, name)
            }
            None => (
                Config::incluster().context("cannot use the in-cluster configuration")?,
                "in-cluster".to_string(),
            ),
        };
        let server = config.cluster_url.to_string();
        let namespace = target
            .namespace
            .clone()
            .unwrap_or_else(|| config.default_namespace.clone());
        let client = client_of(config, target.request_timeout)?;
        Ok(KubeRunner {
            server: Some(server),
            ..Self::from_client(client, &namespace, &cluster, target.container.clone())
        })
    }

    /// A runner over an existing client (tests use one pointed at a test API server).
    pub fn from_client(
        client: Client,
        namespace: &str,
        cluster: &str,
        container: Option<String>,
    ) -> Self {
        KubeRunner {
            pods: Api::namespaced(client, namespace),
            namespace: namespace.to_string(),
            cluster: cluster.to_string(),
            container,
            server: None,
            starts: Arc::new(Semaphore::new(START_TURNS)),
            stream_limit: EXEC_STREAM_LIMIT,
        }
    }

    /// The same runner with another [`EXEC_STREAM_LIMIT`] (tests use seconds).
    pub fn with_stream_limit(self, limit: Duration) -> Self {
        KubeRunner {
            stream_limit: limit,
            ..self
        }
    }

    /// The namespace the pods are in.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// A pod's namespace and name: `NAMESPACE/NAME` as `-A` lists pods (kubectl's way of
    /// naming a pod of another namespace), else the runner's namespace and `pod`.
    pub fn locate<'a>(&'a self, pod: &'a str) -> (&'a str, &'a str) {
        match pod.split_once('/') {
            Some((ns, name)) if !ns.is_empty() && !name.is_empty() => (ns, name),
            _ => (&self.namespace, pod),
        }
    }

    /// The API client, for the pods railsweep creates itself (`--nodes`).
    pub fn client(&self) -> Client {
        self.pods.clone().into_client()
    }

    fn attach_params(&self, stdin: bool) -> AttachParams {
        let mut ap = AttachParams::default()
            .stdin(stdin)
            .stdout(true)
            .stderr(true)
            .max_stdout_buf_size(64 * 1024)
            .max_stderr_buf_size(64 * 1024)
            .max_stdin_buf_size(64 * 1024);
        if let Some(c) = &self.container {
            ap = ap.container(c.clone());
        }
        ap
    }

    async fn attach(&self, pod: &str, argv: &[String], stdin: bool) -> Result<ExecStream> {
        let (ns, name) = self.locate(pod);
        exec::exec(&self.client(), ns, name, argv, &self.attach_params(stdin))
            .await
            .with_context(|| format!("exec in pod {ns}/{name} failed"))
    }

    /// Exec `argv` behind [`spawn_trampoline`] and read its PID line: the process, its PID, what
    /// came on stdout after that line, and the rest of stdout.
    async fn attach_with_pid(
        &self,
        pod: &str,
        argv: &[String],
        stdin: bool,
    ) -> Result<(
        ExecStream,
        u32,
        Vec<u8>,
        impl AsyncRead + Unpin + Send + 'static,
    )> {
        let mut proc = self.attach(pod, &spawn_trampoline(argv), stdin).await?;
        let mut stdout = proc.stdout().context("no stdout")?;
        let mut head = Vec::new();
        let mut chunk = [0u8; 4096];
        // A process's start (its PID line), once the API server answered: as an exec's stream.
        let until = tokio::time::Instant::now() + self.stream_limit;
        // The first line is the PID; if the stream ends first, the status says why.
        let pid = loop {
            match take_pid_line(&mut head) {
                Ok(Some(pid)) => break pid,
                Ok(None) => {}
                Err(e) => bail!("cannot start {} in pod {pod}: {e}", argv[0]),
            }
            let n = tokio::time::timeout_at(until, stdout.read(&mut chunk))
                .await
                .map_err(|_| stream_stalled(pod, argv, self.stream_limit))?
                .unwrap_or(0);
            if n == 0 {
                let out = tokio::time::timeout_at(
                    until,
                    finish(proc, head, None::<tokio::io::Empty>, None),
                )
                .await
                .map_err(|_| stream_stalled(pod, argv, self.stream_limit))?;
                bail!(
                    "cannot start {} in pod {pod}: {}{}",
                    argv[0],
                    out.exit,
                    match out.stderr_tail(3) {
                        t if t.is_empty() => String::new(),
                        t => format!(" ({t})"),
                    }
                );
            }
            head.extend_from_slice(&chunk[..n]);
        };
        Ok((proc, pid, head, stdout))
    }
}

/// An exec whose stream, answered, did not end (or start its process) within its limit.
#[derive(Debug, thiserror::Error)]
#[error(
    "`{program}` in pod {pod}: its exec stream was answered and then had no end within {} s; \
     the pod's node or its kubelet may have stopped answering (kubectl get node; kubectl \
     describe pod {pod})",
    limit.as_secs()
)]
pub struct StreamStalled {
    /// The command's program.
    pub program: String,
    /// The pod.
    pub pod: String,
    /// The limit it ran past.
    pub limit: Duration,
}

fn stream_stalled(pod: &str, argv: &[String], limit: Duration) -> anyhow::Error {
    StreamStalled {
        program: argv.first().cloned().unwrap_or_default(),
        pod: pod.to_string(),
        limit,
    }
    .into()
}

/// The exit a status-channel `Status` stands for (see the module documentation).
pub fn exit_of_status(status: Option<&Status>) -> Exit {
    let Some(s) = status else {
        return Exit::Error("the exec stream closed without an exit status".into());
    };
    if s.status.as_deref() == Some("Success") {
        return Exit::Code(0);
    }
    if s.reason.as_deref() == Some("NonZeroExitCode") {
        let code = s
            .details
            .as_ref()
            .and_then(|d| d.causes.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.reason.as_deref() == Some("ExitCode")))
            .and_then(|c| c.message.as_deref())
            .and_then(|m| m.trim().parse::<i32>().ok());
        if let Some(code) = code {
            return Exit::Code(code);
        }
    }
    Exit::Error(
        s.message
            .clone()
            .or_else(|| s.reason.clone())
            .unwrap_or_else(|| "exec failed".into()),
    )
}

/// Drain stdout and stderr (keeping their tails, [`bounded`]), feed stdin, and wait for the
/// status; `stdout` may already hold the start of standard output.
async fn finish(
    mut proc: ExecStream,
    stdout: Vec<u8>,
    stdout_rest: Option<impl AsyncRead + Unpin>,
    stdin: Option<Vec<u8>>,
) -> Output {
    let status = proc.take_status();
    let stderr_reader = proc.stderr();
    let stdin_writer = proc.stdin();
    let feed = async move {
        if let (Some(data), Some(mut w)) = (stdin, stdin_writer) {
            let _ = w.write_all(&data).await;
            let _ = w.shutdown().await;
        }
    };
    let status = async move {
        match status {
            Some(s) => s.await,
            None => None,
        }
    };
    let (stdout, stderr, status, ()) = tokio::join!(
        bounded::read_tail(stdout_rest, &stdout, bounded::STREAM_TAIL),
        bounded::read_tail(stderr_reader, b"", bounded::STREAM_TAIL),
        status,
        feed
    );
    proc.join().await;
    Output::from_tails(exit_of_status(status.as_ref()), stdout, stderr)
}

impl Runner for KubeRunner {
    fn kind(&self) -> &'static str {
        "kubernetes"
    }

    fn cluster(&self) -> String {
        self.cluster.clone()
    }

    async fn describe(&self, pod: &str) -> Result<PodInfo> {
        let (ns, name) = self.locate(pod);
        let p = Api::<Pod>::namespaced(self.client(), ns)
            .get(name)
            .await
            .with_context(|| format!("cannot get pod {ns}/{name}"))?;
        let spec = p.spec.as_ref().context("the pod has no spec")?;
        let phase = p
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default();
        if phase != "Running" {
            bail!(
                "pod {ns}/{name} is {} (needs to be Running)",
                if phase.is_empty() {
                    "in no phase"
                } else {
                    phase.as_str()
                }
            );
        }
        let names: Vec<&str> = spec.containers.iter().map(|c| c.name.as_str()).collect();
        let container = match &self.container {
            Some(c) if names.contains(&c.as_str()) => c.clone(),
            Some(c) => bail!(
                "pod {ns}/{name} has no container {c} (it has: {})",
                names.join(", ")
            ),
            // kubectl's choice: the default-container annotation, else the first container.
            None => p
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("kubectl.kubernetes.io/default-container"))
                .cloned()
                .or_else(|| names.first().map(|s| s.to_string()))
                .context("the pod has no containers")?,
        };
        Ok(PodInfo {
            name: pod.to_string(),
            node: spec.node_name.clone().unwrap_or_default(),
            host_network: Some(spec.host_network.unwrap_or(false)),
            container: Some(container),
        })
    }

    async fn exec(&self, pod: &str, argv: &[String], stdin: Option<Vec<u8>>) -> Result<Output> {
        let limit = with_input(self.stream_limit, stdin.as_ref().map_or(0, Vec::len));
        let mut proc = self.attach(pod, argv, stdin.is_some()).await?;
        let stdout = proc.stdout();
        tokio::time::timeout(limit, finish(proc, Vec::new(), stdout, stdin))
            .await
            .map_err(|_| stream_stalled(pod, argv, limit))
    }

    async fn spawn(&self, pod: &str, argv: &[String], stdin: Option<Vec<u8>>) -> Result<Spawned> {
        let (proc, pid, head, stdout) = self.attach_with_pid(pod, argv, stdin.is_some()).await?;
        let done = tokio::spawn(async move { Ok(finish(proc, head, Some(stdout), stdin).await) });
        Ok(Spawned { pid, done })
    }

    async fn start(&self, pod: &str, argv: &[String]) -> Result<Piped> {
        let (mut proc, pid, head, stdout) = self.attach_with_pid(pod, argv, true).await?;
        let stdin = proc.stdin().context("no stdin")?;
        let stderr = proc.stderr().context("no stderr")?;
        let status = proc.take_status();
        let done = tokio::spawn(async move {
            let status = match status {
                Some(s) => s.await,
                None => None,
            };
            proc.join().await;
            Ok(exit_of_status(status.as_ref()))
        });
        Ok(Piped {
            pid,
            stdin: Box::pin(stdin),
            stdout: Box::pin(std::io::Cursor::new(head).chain(stdout)),
            stderr: Box::pin(stderr),
            done,
        })
    }

    async fn start_turn(&self) -> StartTurn {
        StartTurn(Arc::clone(&self.starts).acquire_owned().await.ok())
    }

    async fn kill(&self, pod: &str, pid: u32, signal: Signal) -> Result<()> {
        let out = self.exec(pod, &kill_argv(pid, signal), None).await?;
        if !out.exit.success() {
            bail!(
                "kill -s {} {pid} in pod {pod} failed: {} {}",
                signal.name(),
                out.exit,
                out.stderr_tail(2)
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{StatusCause, StatusDetails};

    /// Issue 33: a `KUBECONFIG` list whose first file is missing was refused ("failed to read
    /// kubeconfig"); kubectl skips the missing file and reads the rest.
    #[test]
    fn a_missing_file_in_the_kubeconfig_list_is_skipped() {
        let dir = std::env::temp_dir().join(format!("railsweep-kubeconfig-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let file = dir.join("config");
        std::fs::write(
            &file,
            "apiVersion: v1\nkind: Config\ncurrent-context: lab\nclusters:\n- name: lab\n  \
             cluster:\n    server: https://127.0.0.1:6443\ncontexts:\n- name: lab\n  context:\n    \
             cluster: lab\n    user: u\n    namespace: rdma-hostnet\nusers:\n- name: u\n  user: {}\n",
        )
        .expect("write kubeconfig");
        let missing = dir.join("missing");
        let list = std::env::join_paths([&missing, &file]).expect("join");
        let kc = read_kubeconfig(Some(list.clone()))
            .expect("reads")
            .expect("the second file");
        assert_eq!(kc.current_context.as_deref(), Some("lab"));
        assert_eq!(cluster_name(&kc, None).as_deref(), Some("lab"));
        // Nothing there at all: no kubeconfig, and the error names the files.
        let none = std::env::join_paths([&missing]).expect("join");
        assert!(read_kubeconfig(Some(none.clone()))
            .expect("no error")
            .is_none());
        assert!(kubeconfig_places(Some(none)).contains("missing: no such file"));
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn status_channel_exit_codes() {
        let ok = Status {
            status: Some("Success".into()),
            ..Status::default()
        };
        assert_eq!(exit_of_status(Some(&ok)), Exit::Code(0));
        let three = Status {
            status: Some("Failure".into()),
            reason: Some("NonZeroExitCode".into()),
            message: Some("command terminated with non-zero exit code".into()),
            details: Some(StatusDetails {
                causes: Some(vec![StatusCause {
                    reason: Some("ExitCode".into()),
                    message: Some("3".into()),
                    field: None,
                }]),
                ..StatusDetails::default()
            }),
            ..Status::default()
        };
        assert_eq!(exit_of_status(Some(&three)), Exit::Code(3));
        let internal = Status {
            status: Some("Failure".into()),
            reason: Some("InternalError".into()),
            message: Some("executable file not found in $PATH".into()),
            ..Status::default()
        };
        assert_eq!(
            exit_of_status(Some(&internal)),
            Exit::Error("executable file not found in $PATH".into())
        );
        assert!(matches!(exit_of_status(None), Exit::Error(_)));
    }
}
