//! Exec in a pod over the API server's WebSocket, with railsweep's own upgrade.
//!
//! kube-client 5.0 (`Api::exec`, `Client::connect`) builds the WebSocket with tungstenite's
//! default settings, whose read buffer is 128 KiB per stream, zero-filled at the first read. A
//! fleet holds an exec stream open on every node at once (the server of each pair, its client),
//! so at 1,024 nodes those buffers alone were about 130 MB, most of railsweep's peak (measured with
//! a heap profiler at 256 nodes: 33.5 of 47.4 MB). Everything railsweep reads from an exec is a
//! few KiB of text, so the stream here reads in [`READ_BUFFER`] bytes; a frame larger than that
//! still arrives whole (tungstenite reserves a frame's length when its header arrives).
//!
//! The rest is the protocol as kubectl and kube-rs speak it: the subprotocols
//! `v5.channel.k8s.io` (stdin's end signalled on channel 255) and `v4.channel.k8s.io` (stdin's end
//! closes the WebSocket), one channel byte before each binary message (0 stdin, 1 stdout, 2
//! stderr, 3 the exit `Status`), a ping every minute so that an idle stream (a server waiting
//! for its client) is not closed by a proxy.

use std::future::Future;
use std::time::Duration;

use futures::channel::oneshot;
use futures::{FutureExt, SinkExt, StreamExt};
use http::header::{self, HeaderValue};
use http::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use kube::api::AttachParams;
use kube::client::{Body, UpgradeConnectionError};
use kube::Client;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio_tungstenite::tungstenite::handshake::{client::generate_key, derive_accept_key};
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

/// The WebSocket's read buffer, per exec stream (tungstenite's default is 128 KiB).
pub(super) const READ_BUFFER: usize = 8 * 1024;
/// The most bytes one read of stdin sends in a message: a stdin pipe's whole default buffer
/// (`pipe` in `attach`). `--inject` sends rdmabw through stdin; the modes lab suite injects its
/// 21 MB build, 2,600 messages per pod in 8 KiB ones, each through the API server and the node:
/// the suite's tests took 175 s with 8 KiB and 152 s with 64 KiB (one run each, back to back).
const STDIN_CHUNK: usize = 64 * 1024;
/// The largest message (and frame) railsweep takes from the API server: 1 MiB. A node sends a
/// process's output in pieces of 32 KiB or less; tungstenite's defaults (64 MiB messages of
/// 16 MiB frames) would let one pod's message take that much of railsweep's memory at once.
pub(super) const MAX_MESSAGE: usize = 1024 * 1024;
/// How often an idle stream is pinged.
const PING_EVERY: Duration = Duration::from_secs(60);

const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const STATUS: u8 = 3;
const CLOSE: u8 = 255;
const V5: &str = "v5.channel.k8s.io";
const V4: &str = "v4.channel.k8s.io";

/// A process started by an exec: its standard streams (each once, and only those asked for in
/// the [`AttachParams`]) and its exit status. Dropping it ends the stream.
pub(super) struct ExecStream {
    stdin: Option<DuplexStream>,
    stdout: Option<DuplexStream>,
    stderr: Option<DuplexStream>,
    status: Option<oneshot::Receiver<Status>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl std::fmt::Debug for ExecStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecStream").finish_non_exhaustive()
    }
}

impl Drop for ExecStream {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

impl ExecStream {
    pub(super) fn stdin(&mut self) -> Option<DuplexStream> {
        self.stdin.take()
    }

    pub(super) fn stdout(&mut self) -> Option<DuplexStream> {
        self.stdout.take()
    }

    pub(super) fn stderr(&mut self) -> Option<DuplexStream> {
        self.stderr.take()
    }

    /// The exit status, once: `None` from the future when the stream ended without one.
    pub(super) fn take_status(
        &mut self,
    ) -> Option<impl Future<Output = Option<Status>> + Send + 'static> {
        self.status.take().map(|rx| rx.map(Result::ok))
    }

    /// Close stdin, let go of the unread output and wait for the stream to end.
    pub(super) async fn join(mut self) {
        if let Some(mut w) = self.stdin.take() {
            let _ = w.shutdown().await;
        }
        self.stdout = None;
        self.stderr = None;
        self.status = None;
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

/// Start `argv` in `pod` of `namespace`, as `kubectl exec` does. API errors (no such pod, RBAC)
/// come back as [`kube::Error::Api`], as from any other request.
pub(super) async fn exec(
    client: &Client,
    namespace: &str,
    pod: &str,
    argv: &[String],
    ap: &AttachParams,
) -> kube::Result<ExecStream> {
    let request = kube::core::Request::new(format!("/api/v1/namespaces/{namespace}/pods"))
        .exec(pod, argv.iter().cloned(), ap)
        .map_err(kube::Error::BuildRequest)?;
    let key = generate_key();
    let (mut parts, body) = request.into_parts();
    let headers = &mut parts.headers;
    headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    headers.insert(
        header::SEC_WEBSOCKET_VERSION,
        HeaderValue::from_static("13"),
    );
    headers.insert(
        header::SEC_WEBSOCKET_KEY,
        HeaderValue::from_str(&key).map_err(|e| kube::Error::HttpError(e.into()))?,
    );
    // One header with both, in order of preference (two headers are not understood).
    headers.insert(
        header::SEC_WEBSOCKET_PROTOCOL,
        HeaderValue::from_static("v5.channel.k8s.io, v4.channel.k8s.io"),
    );
    let response = client
        .send(Request::from_parts(parts, Body::from(body)))
        .await?;
    let status = response.status();
    if status.is_client_error() || status.is_server_error() {
        return Err(api_error(
            status,
            response.into_body().collect_bytes().await?,
        ));
    }
    let v5 = switched_protocol(&response, &key).map_err(kube::Error::UpgradeConnection)?;
    let upgraded = hyper::upgrade::on(response).await.map_err(|e| {
        kube::Error::UpgradeConnection(UpgradeConnectionError::GetPendingUpgrade(e))
    })?;
    let ws =
        WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Client, Some(ws_config()))
            .await;
    Ok(attach(ws, v5, ap))
}

/// The WebSocket's settings: a small read buffer, and no message or frame over
/// [`MAX_MESSAGE`] (a larger one ends the stream: the exec then has no exit status).
fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .read_buffer_size(READ_BUFFER)
        .max_message_size(Some(MAX_MESSAGE))
        .max_frame_size(Some(MAX_MESSAGE))
}

/// The process behind an upgraded stream: its pipes, and the message loop that serves them.
fn attach<S>(ws: WebSocketStream<S>, v5: bool, ap: &AttachParams) -> ExecStream
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    // Each pipe holds at most what the caller allows; the message loop waits when one is full.
    // A duplex, not a simplex: when one end is dropped, the other's writes fail at once
    // instead of waiting for a reader that is gone.
    let pipe = |max: Option<usize>| tokio::io::duplex(max.unwrap_or(64 * 1024));
    let (stdin_r, stdin_w) = pipe(ap.max_stdin_buf_size);
    let (stdout_r, stdout_w) = pipe(ap.max_stdout_buf_size);
    let (stderr_r, stderr_w) = pipe(ap.max_stderr_buf_size);
    let (status_tx, status_rx) = oneshot::channel();
    let task = tokio::spawn(message_loop(
        ws,
        v5,
        ap.stdin.then_some(stdin_r),
        ap.stdout.then_some(stdout_w),
        ap.stderr.then_some(stderr_w),
        status_tx,
    ));
    ExecStream {
        stdin: ap.stdin.then_some(stdin_w),
        stdout: ap.stdout.then_some(stdout_r),
        stderr: ap.stderr.then_some(stderr_r),
        status: Some(status_rx),
        task: Some(task),
    }
}

/// An error response's body as the API error it carries (a `Status`), or its text when it is
/// none (a proxy's page), as kube-rs reads error responses.
fn api_error(status: StatusCode, body: bytes::Bytes) -> kube::Error {
    match serde_json::from_slice::<kube::core::Status>(&body) {
        Ok(s) => kube::Error::Api(Box::new(s)),
        Err(_) => kube::Error::Api(Box::new(
            kube::core::Status::failure(
                String::from_utf8_lossy(&body).trim(),
                "Failed to parse error data",
            )
            .with_code(status.as_u16()),
        )),
    }
}

/// Whether the response switched to the WebSocket (RFC 6455's checks) and to which
/// subprotocol: `true` for v5, `false` for v4.
fn switched_protocol(
    response: &http::Response<Body>,
    key: &str,
) -> Result<bool, UpgradeConnectionError> {
    if response.status() != StatusCode::SWITCHING_PROTOCOLS {
        return Err(UpgradeConnectionError::ProtocolSwitch(response.status()));
    }
    let h = response.headers();
    let is = |name: header::HeaderName, want: &str| {
        h.get(name)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case(want))
    };
    if !is(header::UPGRADE, "websocket") {
        return Err(UpgradeConnectionError::MissingUpgradeWebSocketHeader);
    }
    if !is(header::CONNECTION, "Upgrade") {
        return Err(UpgradeConnectionError::MissingConnectionUpgradeHeader);
    }
    if h.get(header::SEC_WEBSOCKET_ACCEPT)
        .is_none_or(|v| v.as_bytes() != derive_accept_key(key.as_bytes()).as_bytes())
    {
        return Err(UpgradeConnectionError::SecWebSocketAcceptKeyMismatch);
    }
    match h.get(header::SEC_WEBSOCKET_PROTOCOL).map(|v| v.as_bytes()) {
        Some(p) if p == V5.as_bytes() => Ok(true),
        Some(p) if p == V4.as_bytes() => Ok(false),
        _ => Err(UpgradeConnectionError::SecWebSocketProtocolMismatch),
    }
}

/// Carry stdin to the pod and stdout, stderr and the status from it, until the status comes or
/// the stream ends. Output nobody reads any more (its reader dropped) is discarded, so that the
/// status still arrives.
async fn message_loop<S>(
    ws: WebSocketStream<S>,
    v5: bool,
    mut stdin: Option<DuplexStream>,
    mut stdout: Option<DuplexStream>,
    mut stderr: Option<DuplexStream>,
    status_tx: oneshot::Sender<Status>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (mut send, mut recv) = ws.split();
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + PING_EVERY, PING_EVERY);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // A stdin message is its channel byte and what one read gave.
    let mut chunk = vec![STDIN; if stdin.is_some() { STDIN_CHUNK } else { 1 }];
    // A send that fails ends the sending, not the loop: the process may have ended without
    // reading all of stdin (`head -c N`), its output and status already sent and still to be
    // read here; the receiving side ends the loop.
    let mut sending = true;
    loop {
        let read_stdin = async {
            match stdin.as_mut() {
                Some(r) => r.read(&mut chunk[1..]).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = ping.tick(), if sending => {
                if send.send(Message::Ping(Default::default())).await.is_err() {
                    (sending, stdin) = (false, None);
                }
            }
            message = recv.next() => match message {
                Some(Ok(Message::Binary(bin))) if bin.len() > 1 => {
                    let out = match bin[0] {
                        STDOUT => &mut stdout,
                        STDERR => &mut stderr,
                        STATUS => {
                            if let Ok(s) = serde_json::from_slice::<Status>(&bin[1..]) {
                                let _ = status_tx.send(s);
                            }
                            break;
                        }
                        _ => continue,
                    };
                    if let Some(w) = out {
                        if w.write_all(&bin[1..]).await.is_err() {
                            *out = None;
                        }
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => break,
            },
            n = read_stdin, if sending => match n {
                Ok(n) if n > 0 => {
                    if send.send(Message::binary(chunk[..=n].to_vec())).await.is_err() {
                        (sending, stdin) = (false, None);
                    }
                }
                // The end of stdin: v5 says so on its own channel; v4 can only close the
                // WebSocket (output still in flight may be lost, as with kubectl).
                _ => {
                    stdin = None;
                    let sent = if v5 {
                        send.send(Message::binary(vec![CLOSE, STDIN])).await
                    } else {
                        send.close().await
                    };
                    sending = sent.is_ok();
                }
            },
        }
    }
    for mut w in [stdout, stderr].into_iter().flatten() {
        let _ = w.shutdown().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server end of the exec protocol over an in-memory stream: sends stdout and stderr,
    /// echoes stdin to stdout until stdin's end, then the status. Returns what it read from
    /// stdin and how stdin ended ("close channel" or "websocket closed").
    async fn serve(
        server: WebSocketStream<tokio::io::DuplexStream>,
        status: &'static str,
    ) -> (Vec<u8>, &'static str) {
        let (mut send, mut recv) = server.split();
        for m in [
            [&[STDOUT][..], b"hello "].concat(),
            [&[STDERR][..], b"warn"].concat(),
        ] {
            send.send(Message::binary(m)).await.expect("send");
        }
        let mut got = Vec::new();
        let end = loop {
            match recv.next().await {
                Some(Ok(Message::Binary(b))) if b[..] == [CLOSE, STDIN] => break "close channel",
                Some(Ok(Message::Binary(b))) if b[0] == STDIN => {
                    got.extend_from_slice(&b[1..]);
                    let echo = [&[STDOUT][..], &b[1..]].concat();
                    send.send(Message::binary(echo)).await.expect("echo");
                }
                Some(Ok(Message::Close(_))) | None => return (got, "websocket closed"),
                other => panic!("unexpected message {other:?}"),
            }
        };
        let status = [&[STATUS][..], status.as_bytes()].concat();
        send.send(Message::binary(status)).await.expect("status");
        (got, end)
    }

    async fn pair() -> (
        WebSocketStream<tokio::io::DuplexStream>,
        WebSocketStream<tokio::io::DuplexStream>,
    ) {
        let (a, b) = tokio::io::duplex(4096);
        (
            WebSocketStream::from_raw_socket(a, Role::Client, Some(ws_config())).await,
            WebSocketStream::from_raw_socket(b, Role::Server, None).await,
        )
    }

    fn params(stdin: bool) -> AttachParams {
        AttachParams::default()
            .stdin(stdin)
            .stdout(true)
            .stderr(true)
            .max_stdout_buf_size(1024)
    }

    #[tokio::test]
    async fn v5_carries_the_three_streams_signals_stdins_end_and_returns_the_status() {
        let (client, server) = pair().await;
        let server =
            tokio::spawn(
                async move { serve(server, r#"{"status":"Success","metadata":{}}"#).await },
            );
        let mut p = attach(client, true, &params(true));
        let (mut stdin, mut stdout, mut stderr) = (
            p.stdin().expect("stdin"),
            p.stdout().expect("stdout"),
            p.stderr().expect("stderr"),
        );
        let status = p.take_status().expect("status");
        stdin.write_all(b"ping").await.expect("write");
        stdin.shutdown().await.expect("shutdown");
        drop(stdin);
        let (mut out, mut err) = (Vec::new(), Vec::new());
        stdout.read_to_end(&mut out).await.expect("stdout");
        stderr.read_to_end(&mut err).await.expect("stderr");
        assert_eq!(out, b"hello ping");
        assert_eq!(err, b"warn");
        let status = status.await.expect("a status");
        assert_eq!(status.status.as_deref(), Some("Success"));
        p.join().await;
        assert_eq!(
            server.await.expect("server"),
            (b"ping".to_vec(), "close channel")
        );
    }

    #[tokio::test]
    async fn v4_ends_stdin_by_closing_the_websocket() {
        let (client, server) = pair().await;
        let server = tokio::spawn(async move { serve(server, "{}").await });
        let mut p = attach(client, false, &params(true));
        let mut stdin = p.stdin().expect("stdin");
        stdin.write_all(b"x").await.expect("write");
        stdin.shutdown().await.expect("shutdown");
        drop(stdin);
        let (got, end) = server.await.expect("server");
        assert_eq!((got.as_slice(), end), (&b"x"[..], "websocket closed"));
        p.join().await;
    }

    /// A caller that stops reading stdout (it dropped the reader) still gets the exit status.
    #[tokio::test]
    async fn the_status_arrives_when_nobody_reads_stdout() {
        let (client, server) = pair().await;
        let exit = r#"{"status":"Failure","reason":"NonZeroExitCode","metadata":{},
            "details":{"causes":[{"reason":"ExitCode","message":"3"}]}}"#;
        let server = tokio::spawn(async move { serve(server, exit).await });
        let mut p = attach(client, true, &params(true));
        drop(p.stdout());
        let status = p.take_status().expect("status");
        let mut stdin = p.stdin().expect("stdin");
        stdin.write_all(&vec![b'y'; 5000]).await.expect("write");
        stdin.shutdown().await.expect("shutdown");
        let status = tokio::time::timeout(Duration::from_secs(10), status)
            .await
            .expect("no hang")
            .expect("a status");
        assert_eq!(
            super::super::kube::exit_of_status(Some(&status)),
            super::super::Exit::Code(3)
        );
        assert_eq!(server.await.expect("server").0.len(), 5000);
    }

    /// A process that ends before reading all of its stdin (`head -c N`, as --inject runs):
    /// its side sends the output and the status and goes, and sending the rest of stdin
    /// fails. The output and the status still arrive: a failed send used to end the loop and
    /// lose both, which is how the cluster's `kube_exec` test once lost `head -c`'s output on a
    /// loaded machine.
    #[tokio::test]
    async fn output_and_status_arrive_when_the_process_ends_before_reading_all_stdin() {
        let (client, server) = pair().await;
        let server = tokio::spawn(async move {
            let (mut send, mut recv) = server.split();
            // One message of stdin read, while the client sends the next.
            let first = recv.next().await;
            assert!(matches!(first, Some(Ok(Message::Binary(_)))), "{first:?}");
            for m in [
                [&[STDOUT][..], b"150000\n"].concat(),
                [&[STATUS][..], br#"{"status":"Success","metadata":{}}"#].concat(),
            ] {
                send.send(Message::binary(m)).await.expect("send");
            }
            // The server goes without reading the rest.
        });
        let mut p = attach(client, true, &params(true));
        let (mut stdin, mut stdout) = (p.stdin().expect("stdin"), p.stdout().expect("stdout"));
        let status = p.take_status().expect("status");
        // Messages larger than the in-memory connection holds: the second send waits for a
        // reader, and fails when the server goes.
        let feed = tokio::spawn(async move {
            let _ = stdin.write_all(&vec![b'z'; 200_000]).await;
            let _ = stdin.shutdown().await;
        });
        let mut out = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), stdout.read_to_end(&mut out))
            .await
            .expect("no hang")
            .expect("stdout");
        assert_eq!(out, b"150000\n");
        let status = tokio::time::timeout(Duration::from_secs(10), status)
            .await
            .expect("no hang")
            .expect("a status");
        assert_eq!(status.status.as_deref(), Some("Success"));
        feed.await.expect("the feed ends");
        server.await.expect("server");
        p.join().await;
    }

    /// Issue 53, finding 2: a message larger than [`MAX_MESSAGE`] ends the stream (without an
    /// exit status) instead of taking its size in memory.
    #[tokio::test]
    async fn a_message_over_the_limit_ends_the_stream() {
        let (client, server) = pair().await;
        let server = tokio::spawn(async move {
            let (mut send, _recv) = server.split();
            let mut big = vec![b'x'; 2 * MAX_MESSAGE];
            big[0] = STDOUT;
            let _ = send.send(Message::binary(big)).await;
            let status = [&[STATUS][..], br#"{"status":"Success","metadata":{}}"#].concat();
            let _ = send.send(Message::binary(status)).await;
        });
        let mut p = attach(client, true, &params(false));
        let mut stdout = p.stdout().expect("stdout");
        let status = p.take_status().expect("status");
        let mut out = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), stdout.read_to_end(&mut out))
            .await
            .expect("no hang")
            .expect("stdout");
        assert!(out.is_empty(), "{} bytes", out.len());
        let status = tokio::time::timeout(Duration::from_secs(10), status)
            .await
            .expect("no hang");
        assert!(status.is_none(), "{status:?}");
        let _ = server.await;
        p.join().await;
    }

    #[test]
    fn an_error_response_is_the_api_error_it_carries_or_its_text() {
        let forbidden = br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
            "message":"pods \"a\" is forbidden","reason":"Forbidden","code":403}"#;
        match api_error(StatusCode::FORBIDDEN, bytes::Bytes::from_static(forbidden)) {
            kube::Error::Api(s) => {
                assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden"));
                assert_eq!(s.message, r#"pods "a" is forbidden"#);
            }
            e => panic!("not an API error: {e}"),
        }
        match api_error(
            StatusCode::BAD_GATEWAY,
            bytes::Bytes::from_static(b" bad gateway\n"),
        ) {
            kube::Error::Api(s) => assert_eq!((s.code, s.message.as_str()), (502, "bad gateway")),
            e => panic!("not an API error: {e}"),
        }
    }

    #[test]
    fn the_upgrade_is_checked_as_rfc_6455_says() {
        let key = generate_key();
        let response = |accept: &str, protocol: &str| {
            http::Response::builder()
                .status(StatusCode::SWITCHING_PROTOCOLS)
                .header(header::UPGRADE, "websocket")
                .header(header::CONNECTION, "Upgrade")
                .header(header::SEC_WEBSOCKET_ACCEPT, accept)
                .header(header::SEC_WEBSOCKET_PROTOCOL, protocol)
                .body(Body::from(Vec::new()))
                .expect("response")
        };
        let accept = derive_accept_key(key.as_bytes());
        assert!(matches!(
            switched_protocol(&response(&accept, V5), &key),
            Ok(true)
        ));
        assert!(matches!(
            switched_protocol(&response(&accept, V4), &key),
            Ok(false)
        ));
        assert!(matches!(
            switched_protocol(&response("wrong", V5), &key),
            Err(UpgradeConnectionError::SecWebSocketAcceptKeyMismatch)
        ));
        assert!(matches!(
            switched_protocol(&response(&accept, "channel.k8s.io"), &key),
            Err(UpgradeConnectionError::SecWebSocketProtocolMismatch)
        ));
        let ok = http::Response::builder()
            .status(StatusCode::OK)
            .body(Body::from(Vec::new()))
            .expect("response");
        assert!(matches!(
            switched_protocol(&ok, &key),
            Err(UpgradeConnectionError::ProtocolSwitch(StatusCode::OK))
        ));
    }
}
