//! A small Kubernetes API server for tests: it serves a fixed set of pods (list, get) and pod
//! exec over WebSocket, running each exec's argument vector for real in the pod's network
//! namespace (`ip netns exec NETNS argv...`, or directly for a pod without one).
//!
//! It speaks what kube-rs (and kubectl) speak to a real API server: HTTP/1.1, JSON objects of
//! the core/v1 API, `Status` errors, and for exec an HTTP 101 upgrade to WebSocket with the
//! `v5.channel.k8s.io` or `v4.channel.k8s.io` subprotocol: binary frames whose first byte is the
//! channel (0 stdin, 1 stdout, 2 stderr, 3 status, 4 resize; v5 adds 255 = close a channel),
//! and at the end a `Status` on channel 3: `Success`, or `Failure` with reason
//! `NonZeroExitCode` and the code in `details.causes[reason=ExitCode]`, as the kubelet sends it.
//!
//! Like a kubelet, it does not end a process when its exec stream closes.
//!
//! With a [`cluster::Cluster`] ([`start_with`]), it also creates, watches and deletes pods,
//! with the status and events of a simulated scheduler and kubelet (see `cluster.rs`).

#[path = "cluster.rs"]
pub mod cluster;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::Arc;

use futures::{SinkExt, StreamExt};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{
    HeaderValue, CONNECTION, SEC_WEBSOCKET_ACCEPT, SEC_WEBSOCKET_KEY, SEC_WEBSOCKET_PROTOCOL,
    UPGRADE,
};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::process::Command;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

/// One pod the server serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestPod {
    /// Pod name.
    pub name: String,
    /// Network namespace its commands run in; `None` runs them directly on this machine.
    pub netns: Option<String>,
    /// Node name (`spec.nodeName`).
    pub node: String,
    /// Pod IP (`status.podIP`).
    pub ip: Option<String>,
    /// `spec.hostNetwork`.
    pub host_network: bool,
    /// The one container's name.
    pub container: String,
}

impl TestPod {
    /// Parse `NAME[,netns=NS|-][,node=N][,ip=IP][,hostnet][,container=C]`.
    pub fn parse(spec: &str) -> Result<TestPod, String> {
        let mut parts = spec.split(',');
        let name = parts
            .next()
            .filter(|n| !n.is_empty())
            .ok_or("empty pod spec")?;
        let mut pod = TestPod {
            name: name.to_string(),
            netns: Some(name.to_string()),
            node: format!("node-{name}"),
            ip: None,
            host_network: false,
            container: "rdma".to_string(),
        };
        for p in parts {
            match p.split_once('=') {
                Some(("netns", "-")) => pod.netns = None,
                Some(("netns", v)) => pod.netns = Some(v.to_string()),
                Some(("node", v)) => pod.node = v.to_string(),
                Some(("ip", v)) => pod.ip = Some(v.to_string()),
                Some(("container", v)) => pod.container = v.to_string(),
                None if p == "hostnet" => pod.host_network = true,
                _ => return Err(format!("unknown pod option `{p}` in `{spec}`")),
            }
        }
        Ok(pod)
    }

    fn object(&self, namespace: &str) -> Value {
        let ips: Vec<Value> = self.ip.iter().map(|ip| json!({ "ip": ip })).collect();
        json!({
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": {
                "name": self.name,
                "namespace": namespace,
                "uid": format!("00000000-0000-4000-8000-{:012x}", fnv(&self.name)),
                "resourceVersion": "1",
                "labels": { "app": "railbench-lab" },
                "annotations": { "kubectl.kubernetes.io/default-container": self.container },
            },
            "spec": {
                "nodeName": self.node,
                "hostNetwork": self.host_network,
                "containers": [{ "name": self.container, "image": "railbench/lab:local" }],
            },
            "status": {
                "phase": "Running",
                "hostIP": self.ip,
                "podIP": self.ip,
                "podIPs": ips,
                "containerStatuses": [{
                    "name": self.container, "ready": true, "restartCount": 0,
                    "image": "railbench/lab:local", "imageID": "", "started": true,
                    "state": { "running": { "startedAt": "2026-01-01T00:00:00Z" } },
                }],
            },
        })
    }
}

fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100000001b3)
    }) & 0xffff_ffff_ffff
}

/// What the server serves.
#[derive(Debug, Clone)]
pub struct ApiServer {
    /// The namespace the pods are in.
    pub namespace: String,
    /// The pods.
    pub pods: Vec<TestPod>,
    /// Bearer token every request must carry, if set.
    pub token: Option<String>,
    /// Log every request and exec on stderr.
    pub verbose: bool,
}

type Body = Full<Bytes>;

fn status_object(code: u16, reason: &str, message: &str) -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code,
    })
}

fn json_response(code: StatusCode, v: &Value) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(v.to_string())));
    *r.status_mut() = code;
    r.headers_mut()
        .insert("content-type", HeaderValue::from_static("application/json"));
    r
}

fn error(code: StatusCode, reason: &str, message: &str) -> Response<Body> {
    json_response(code, &status_object(code.as_u16(), reason, message))
}

/// The exec's final `Status`, as the kubelet writes it on channel 3.
pub fn exec_status(code: i32) -> Value {
    if code == 0 {
        json!({ "metadata": {}, "status": "Success" })
    } else {
        json!({
            "metadata": {},
            "status": "Failure",
            "message": format!("command terminated with non-zero exit code: exit status {code}"),
            "reason": "NonZeroExitCode",
            "details": { "causes": [{ "reason": "ExitCode", "message": code.to_string() }] },
        })
    }
}

/// Bind `addr` and serve until the process ends. Returns the bound address at once (the
/// serving goes on in a task).
pub async fn start(server: ApiServer, addr: SocketAddr) -> std::io::Result<SocketAddr> {
    start_with(server, None, addr).await
}

/// [`start`], with a simulated cluster that creates, runs and deletes pods.
pub async fn start_with(
    server: ApiServer,
    cluster: Option<Arc<cluster::Cluster>>,
    addr: SocketAddr,
) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let server = Arc::new(server);
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let server = server.clone();
            let cluster = cluster.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req| {
                    let server = server.clone();
                    let cluster = cluster.clone();
                    async move { Ok::<_, Infallible>(handle(server, cluster, req).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .with_upgrades()
                    .await;
            });
        }
    });
    Ok(local)
}

/// A kubeconfig that points kube-rs or kubectl at this server.
pub fn kubeconfig(url: &str, namespace: &str, token: Option<&str>) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: railbench-lab\n  cluster:\n    server: {url}\n\
         contexts:\n- name: lab\n  context:\n    cluster: railbench-lab\n    user: lab\n    namespace: {namespace}\n\
         current-context: lab\nusers:\n- name: lab\n  user:\n{}",
        match token {
            Some(t) => format!("    token: {t}\n"),
            None => "    {}\n".to_string(),
        }
    )
}

async fn handle(
    server: Arc<ApiServer>,
    cluster: Option<Arc<cluster::Cluster>>,
    mut req: Request<hyper::body::Incoming>,
) -> Response<Body> {
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let resp = route(&server, cluster.as_ref(), &mut req, &path, &query).await;
    if server.verbose {
        eprintln!(
            "kube-testserver: {} {path} -> {}",
            req.method(),
            resp.status().as_u16()
        );
    }
    resp
}

async fn route(
    server: &ApiServer,
    cluster: Option<&Arc<cluster::Cluster>>,
    req: &mut Request<hyper::body::Incoming>,
    path: &str,
    query: &str,
) -> Response<Body> {
    if let Some(t) = &server.token {
        let want = format!("Bearer {t}");
        if req
            .headers()
            .get("authorization")
            .and_then(|h| h.to_str().ok())
            != Some(want.as_str())
        {
            return error(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized");
        }
    }
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    if let Some(c) = cluster {
        let fixed: Vec<Value> = server
            .pods
            .iter()
            .map(|p| p.object(&server.namespace))
            .collect();
        if let Some(r) = c.route(req, &segs, query, &fixed).await {
            return r;
        }
    }
    match (req.method().clone(), segs.as_slice()) {
        (Method::GET, ["version"]) => json_response(
            StatusCode::OK,
            &json!({ "major": "1", "minor": "33", "gitVersion": "v1.33.0-railbench-testserver", "platform": "linux/amd64" }),
        ),
        (Method::GET, ["api", "v1", "pods"]) => list(server, None),
        (Method::GET, ["api", "v1", "namespaces", ns, "pods"]) => list(server, Some(ns)),
        (Method::GET, ["api", "v1", "namespaces", ns, "pods", name]) => {
            match find(server, ns, name) {
                Some(p) => json_response(StatusCode::OK, &p.object(&server.namespace)),
                None => not_found(name),
            }
        }
        (Method::GET | Method::POST, ["api", "v1", "namespaces", ns, "pods", name, "exec"]) => {
            match find(server, ns, name)
                .cloned()
                .or_else(|| cluster.and_then(|c| c.test_pod(ns, name)))
            {
                Some(p) => exec(server, p, req, query),
                None => not_found(name),
            }
        }
        _ => error(
            StatusCode::NOT_FOUND,
            "NotFound",
            &format!("the server could not find the requested resource ({path})"),
        ),
    }
}

fn not_found(name: &str) -> Response<Body> {
    error(
        StatusCode::NOT_FOUND,
        "NotFound",
        &format!("pods \"{name}\" not found"),
    )
}

fn find<'a>(server: &'a ApiServer, ns: &str, name: &str) -> Option<&'a TestPod> {
    (ns == server.namespace)
        .then(|| server.pods.iter().find(|p| p.name == name))
        .flatten()
}

fn list(server: &ApiServer, ns: Option<&str>) -> Response<Body> {
    let items: Vec<Value> = if ns.is_none_or(|n| n == server.namespace) {
        server
            .pods
            .iter()
            .map(|p| p.object(&server.namespace))
            .collect()
    } else {
        vec![]
    };
    json_response(
        StatusCode::OK,
        &json!({ "kind": "PodList", "apiVersion": "v1", "metadata": { "resourceVersion": "1" }, "items": items }),
    )
}

/// Parameters of one exec request.
#[derive(Debug, Clone, Default)]
struct ExecParams {
    command: Vec<String>,
    container: Option<String>,
    stdin: bool,
    stdout: bool,
    stderr: bool,
    tty: bool,
}

fn exec_params(query: &str) -> ExecParams {
    let mut p = ExecParams::default();
    let yes = |v: &str| v == "true" || v == "1";
    for (k, v) in form_urlencoded::parse(query.as_bytes()) {
        match k.as_ref() {
            "command" => p.command.push(v.into_owned()),
            "container" => p.container = Some(v.into_owned()),
            "stdin" => p.stdin = yes(&v),
            "stdout" => p.stdout = yes(&v),
            "stderr" => p.stderr = yes(&v),
            "tty" => p.tty = yes(&v),
            _ => {}
        }
    }
    p
}

const PROTOCOLS: [&str; 2] = ["v5.channel.k8s.io", "v4.channel.k8s.io"];

fn exec(
    server: &ApiServer,
    pod: TestPod,
    req: &mut Request<hyper::body::Incoming>,
    query: &str,
) -> Response<Body> {
    let params = exec_params(query);
    if params.command.is_empty() {
        return error(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            "you must specify at least 1 command",
        );
    }
    if let Some(c) = &params.container {
        if *c != pod.container {
            return error(
                StatusCode::BAD_REQUEST,
                "BadRequest",
                &format!("container {c} is not valid for pod {}", pod.name),
            );
        }
    }
    if params.tty {
        return error(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            "tty is not supported by this test server",
        );
    }
    let upgrade = req
        .headers()
        .get(UPGRADE)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    let Some(key) = req.headers().get(SEC_WEBSOCKET_KEY).cloned() else {
        return error(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            "exec needs a WebSocket upgrade (no Sec-WebSocket-Key)",
        );
    };
    if !upgrade.eq_ignore_ascii_case("websocket") {
        return error(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            "exec needs `Upgrade: websocket`",
        );
    }
    let offered: Vec<String> = req
        .headers()
        .get_all(SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|h| h.to_str().ok())
        .flat_map(|h| h.split(',').map(|s| s.trim().to_string()))
        .collect();
    let Some(protocol) = PROTOCOLS.iter().find(|p| offered.iter().any(|o| o == *p)) else {
        return error(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            &format!(
                "no supported exec subprotocol in {offered:?} (this server speaks {PROTOCOLS:?})"
            ),
        );
    };
    let v5 = *protocol == PROTOCOLS[0];
    let on_upgrade = hyper::upgrade::on(req);
    let verbose = server.verbose;
    tokio::spawn(async move {
        match on_upgrade.await {
            Ok(upgraded) => {
                let ws =
                    WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, None)
                        .await;
                run_exec(ws, pod, params, v5, verbose).await;
            }
            Err(e) => eprintln!("kube-testserver: upgrade failed: {e}"),
        }
    });
    let mut r = Response::new(Full::new(Bytes::new()));
    *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = r.headers_mut();
    h.insert(UPGRADE, HeaderValue::from_static("websocket"));
    h.insert(CONNECTION, HeaderValue::from_static("Upgrade"));
    if let Ok(v) = HeaderValue::from_str(&derive_accept_key(key.as_bytes())) {
        h.insert(SEC_WEBSOCKET_ACCEPT, v);
    }
    h.insert(SEC_WEBSOCKET_PROTOCOL, HeaderValue::from_static(protocol));
    r
}

fn frame(channel: u8, data: &[u8]) -> Message {
    let mut v = Vec::with_capacity(data.len() + 1);
    v.push(channel);
    v.extend_from_slice(data);
    Message::binary(v)
}

/// Forward a pipe to the client on `channel`; keep draining it after the client is gone, so
/// the process never blocks on a full pipe (it goes on running, as under a kubelet).
async fn pump(mut r: impl AsyncRead + Unpin, channel: u8, tx: mpsc::UnboundedSender<Message>) {
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let _ = tx.send(frame(channel, &buf[..n]));
            }
        }
    }
}

async fn run_exec<S>(ws: WebSocketStream<S>, pod: TestPod, p: ExecParams, v5: bool, verbose: bool)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sink, mut incoming) = ws.split();
    let (tx, mut rx) = mpsc::unbounded_channel::<Message>();
    // The writer: everything to the client goes through here, in order.
    let writer = tokio::spawn(async move {
        let mut open = true;
        while let Some(m) = rx.recv().await {
            let close = matches!(m, Message::Close(_));
            if open && sink.send(m).await.is_err() {
                open = false;
            }
            if close {
                break;
            }
        }
        let _ = sink.close().await;
    });
    // As the API server does, an empty frame per output channel announces it.
    for ch in [1u8, 2, 3] {
        let _ = tx.send(frame(ch, &[]));
    }

    let mut cmd = match &pod.netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]).args(&p.command);
            c
        }
        None => {
            let mut c = Command::new(&p.command[0]);
            c.args(&p.command[1..]);
            c
        }
    };
    cmd.stdin(if p.stdin {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(if p.stdout {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stderr(if p.stderr {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .kill_on_drop(false);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let status = json!({
                "metadata": {}, "status": "Failure", "reason": "InternalError",
                "message": format!(
                    "Internal error occurred: error executing command in container: failed to exec in container: \
                     exec: \"{}\": {e}", p.command[0]
                ),
            });
            let _ = tx.send(frame(3, status.to_string().as_bytes()));
            let _ = tx.send(Message::Close(None));
            let _ = writer.await;
            return;
        }
    };
    if verbose {
        eprintln!(
            "kube-testserver: exec in {} (pid {:?}): {:?}",
            pod.name,
            child.id(),
            p.command
        );
    }
    let mut stdin = child.stdin.take();
    let out = child
        .stdout
        .take()
        .map(|o| tokio::spawn(pump(o, 1, tx.clone())));
    let err = child
        .stderr
        .take()
        .map(|e| tokio::spawn(pump(e, 2, tx.clone())));

    // The client's side: stdin data, v5 close of stdin, or the end of the connection.
    let reader = tokio::spawn(async move {
        while let Some(msg) = incoming.next().await {
            match msg {
                Ok(Message::Binary(b)) if !b.is_empty() => match b[0] {
                    0 => {
                        if let Some(w) = stdin.as_mut() {
                            if w.write_all(&b[1..]).await.is_err() {
                                stdin = None;
                            }
                        }
                    }
                    255 if v5 && b.get(1) == Some(&0) => {
                        if let Some(mut w) = stdin.take() {
                            let _ = w.shutdown().await;
                        }
                    }
                    _ => {}
                },
                Ok(Message::Close(_)) | Err(_) => break,
                Ok(_) => {}
            }
        }
        // Connection gone: stdin ends, the process goes on.
        drop(stdin);
    });

    let status = child.wait().await;
    if let Some(t) = out {
        let _ = t.await;
    }
    if let Some(t) = err {
        let _ = t.await;
    }
    let code = match status {
        Ok(s) => {
            use std::os::unix::process::ExitStatusExt;
            s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0))
        }
        Err(_) => 255,
    };
    if verbose {
        eprintln!("kube-testserver: exec in {} ended: exit {code}", pod.name);
    }
    let _ = tx.send(frame(3, exec_status(code).to_string().as_bytes()));
    let _ = tx.send(Message::Close(None));
    drop(tx);
    let _ = writer.await;
    reader.abort();
}
