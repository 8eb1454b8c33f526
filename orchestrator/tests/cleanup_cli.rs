//! Issue 56, "Exits and clean-up": railsweep against an API server that misbehaves (a fake of
//! it here, HTTP/1.1 on a local port): pods that will not start (ErrImageNeverPull), whose
//! DELETE is answered with a proxy's 503 page or never answered, and a GET never answered.
//! railsweep must say the pods' diagnosis before its clean-up, end the clean-up within its
//! bound, say every API error in kubectl's words (never kube-rs's debug text), name the pods
//! it leaves with the command that deletes them, leave at once on a second Ctrl-C, and exit
//! as the exits table says.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// How the fake API server answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Delete {
    /// A 503 whose body is a proxy's page, not a `Status`.
    Unavailable,
    /// Never.
    Hang,
    /// A pod's first DELETE throttled as API Priority and Fairness does (429 with Retry-After),
    /// the next one done: the pod is gone.
    Throttled,
}

/// How the fake answers a GET.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Get {
    /// As an API server does.
    Answer,
    /// Never.
    Hang,
    /// Its status and headers, then never the body they announce.
    StallBody,
}

/// The fake: pods it was given, answered as created and stuck in ErrImageNeverPull.
struct FakeApi {
    url: String,
    /// Requests, as `METHOD PATH`.
    log: Arc<Mutex<Vec<String>>>,
    _dir: tempfile::TempDir,
    kubeconfig: std::path::PathBuf,
}

impl FakeApi {
    fn start(delete: Delete, get: Get) -> FakeApi {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a port");
        let url = format!("http://{}", listener.local_addr().expect("its address"));
        let log = Arc::new(Mutex::new(Vec::new()));
        let pods = Arc::new(Mutex::new(
            std::collections::BTreeMap::<String, Value>::new(),
        ));
        let (l, p) = (log.clone(), pods.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (l, p) = (l.clone(), p.clone());
                std::thread::spawn(move || serve(conn, delete, get, &l, &p));
            }
        });
        let dir = tempfile::tempdir().expect("temp dir");
        let kubeconfig = dir.path().join("config");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\ncurrent-context: fake\nclusters:\n- name: fake\n  \
                 cluster:\n    server: {url}\ncontexts:\n- name: fake\n  context:\n    cluster: \
                 fake\n    user: u\n    namespace: railbench\nusers:\n- name: u\n  user: {{}}\n"
            ),
        )
        .expect("write the kubeconfig");
        FakeApi {
            url,
            log,
            _dir: dir,
            kubeconfig,
        }
    }

    fn requests(&self) -> Vec<String> {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

/// A pod as the API server returns it: created, its container waiting in ErrImageNeverPull.
fn stuck(mut pod: Value) -> Value {
    let name = pod["metadata"]["name"].as_str().unwrap_or("?").to_string();
    pod["metadata"]["uid"] = json!(format!("uid-{name}"));
    pod["metadata"]["resourceVersion"] = json!("5");
    let container = pod["spec"]["containers"][0]["name"].clone();
    let image = pod["spec"]["containers"][0]["image"].clone();
    pod["status"] = json!({
        "phase": "Pending",
        "containerStatuses": [{
            "name": container, "image": image, "imageID": "", "ready": false, "restartCount": 0,
            "state": {"waiting": {"reason": "ErrImageNeverPull",
                "message": format!("Container image {image} is not present with pull policy of Never")}}
        }]
    });
    pod
}

fn respond(conn: &mut TcpStream, code: u16, body: &str, content_type: &str) {
    let _ = write!(
        conn,
        "HTTP/1.1 {code} X\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let _ = conn.flush();
}

fn serve(
    conn: TcpStream,
    delete: Delete,
    get: Get,
    log: &Mutex<Vec<String>>,
    pods: &Mutex<std::collections::BTreeMap<String, Value>>,
) {
    let mut reader = BufReader::new(conn.try_clone().expect("clone"));
    let mut conn = conn;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (method, target) = (
            parts.next().unwrap_or("").to_string(),
            parts.next().unwrap_or("").to_string(),
        );
        let mut length = 0usize;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            if h.trim().is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0u8; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        if let Ok(mut l) = log.lock() {
            l.push(format!("{method} {target}"));
        }
        let path = target.split('?').next().unwrap_or("").to_string();
        let hang = || loop {
            std::thread::sleep(Duration::from_secs(3600));
        };
        let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
        let json_type = "application/json";
        match (method.as_str(), segs.as_slice()) {
            ("POST", ["api", "v1", "namespaces", _, "pods"]) => {
                let pod = stuck(serde_json::from_slice(&body).unwrap_or(Value::Null));
                let name = pod["metadata"]["name"].as_str().unwrap_or("?").to_string();
                if let Ok(mut p) = pods.lock() {
                    p.insert(name, pod.clone());
                }
                respond(&mut conn, 201, &pod.to_string(), json_type);
            }
            ("GET", _) if get == Get::Hang => hang(),
            ("GET", _) if get == Get::StallBody => {
                let _ = write!(
                    conn,
                    "HTTP/1.1 200 OK\r\nContent-Type: {json_type}\r\nContent-Length: 1000\r\n\r\n{{"
                );
                let _ = conn.flush();
                hang();
            }
            ("GET", ["api", "v1", "namespaces", _, "pods"]) if target.contains("watch=") => {
                // A watch: answered, then nothing more (the pods never change).
                let _ = write!(
                    conn,
                    "HTTP/1.1 200 OK\r\nContent-Type: {json_type}\r\nTransfer-Encoding: chunked\r\n\r\n"
                );
                let _ = conn.flush();
                hang();
            }
            ("GET", ["api", "v1", "namespaces", _, "pods"]) => {
                let items: Vec<Value> = pods
                    .lock()
                    .map(|p| p.values().cloned().collect())
                    .unwrap_or_default();
                let items: Vec<Value> = items
                    .into_iter()
                    .filter(|p| {
                        let name = p["metadata"]["name"].as_str().unwrap_or("");
                        !target.contains("metadata.name") || target.contains(name)
                    })
                    .collect();
                let list = json!({"kind": "PodList", "apiVersion": "v1",
                    "metadata": {"resourceVersion": "5"}, "items": items});
                respond(&mut conn, 200, &list.to_string(), json_type);
            }
            ("GET", ["api", "v1", "namespaces", _, "pods", name]) => {
                let pod = pods.lock().ok().and_then(|p| p.get(*name).cloned());
                match pod {
                    Some(pod) => respond(&mut conn, 200, &pod.to_string(), json_type),
                    None => not_found(&mut conn, name),
                }
            }
            ("GET", ["api", "v1", "namespaces", _, "events"]) => {
                let list = json!({"kind": "EventList", "apiVersion": "v1",
                    "metadata": {"resourceVersion": "5"}, "items": []});
                respond(&mut conn, 200, &list.to_string(), json_type);
            }
            ("DELETE", _) if delete == Delete::Hang => hang(),
            ("DELETE", ["api", "v1", "namespaces", _, "pods", name])
                if delete == Delete::Throttled =>
            {
                let sent = log
                    .lock()
                    .map(|l| {
                        l.iter()
                            .filter(|r| **r == format!("{method} {target}"))
                            .count()
                    })
                    .unwrap_or(0);
                if sent == 1 {
                    let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                        "message": "Too many requests, please try again later.",
                        "reason": "TooManyRequests", "code": 429});
                    let body = status.to_string();
                    let _ = write!(
                        conn,
                        "HTTP/1.1 429 X\r\nContent-Type: {json_type}\r\nRetry-After: 1\r\n\
                         Content-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = conn.flush();
                } else {
                    let pod = pods.lock().ok().and_then(|mut p| p.remove(*name));
                    match pod {
                        Some(pod) => respond(&mut conn, 200, &pod.to_string(), json_type),
                        None => not_found(&mut conn, name),
                    }
                }
            }
            ("DELETE", _) => respond(
                &mut conn,
                503,
                "upstream connect error or disconnect/reset before headers. reset reason: \
                 connection failure",
                "text/plain",
            ),
            _ => not_found(&mut conn, &path),
        }
    }
}

fn not_found(conn: &mut TcpStream, what: &str) {
    let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
        "message": format!("{what} not found"), "reason": "NotFound", "code": 404});
    respond(conn, 404, &status.to_string(), "application/json");
}

/// railsweep, started with `args`; its stderr read as it comes.
struct Running {
    child: std::process::Child,
    stderr: Arc<Mutex<String>>,
    started: Instant,
}

impl Running {
    fn start(args: &[&str]) -> Running {
        let mut child = Command::new(env!("CARGO_BIN_EXE_railsweep"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("railsweep starts");
        let stderr = Arc::new(Mutex::new(String::new()));
        let (mut pipe, into) = (child.stderr.take().expect("stderr"), stderr.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if let Ok(mut s) = into.lock() {
                    s.push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            }
        });
        Running {
            child,
            stderr,
            started: Instant::now(),
        }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Waits until stderr holds `what`, at most `limit`.
    fn wait_for(&self, what: &str, limit: Duration) {
        let t0 = Instant::now();
        while !self.stderr().contains(what) {
            assert!(
                t0.elapsed() < limit,
                "no {what:?} within {limit:?}:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn interrupt(&self) {
        let sent = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success());
    }

    /// Its exit code, and the time since it started; killed (a failure) after `limit`.
    fn wait(mut self, limit: Duration) -> (Option<i32>, Duration, String) {
        let t0 = Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                std::thread::sleep(Duration::from_millis(100)); // the last of stderr
                return (status.code(), self.started.elapsed(), self.stderr());
            }
            if t0.elapsed() > limit {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("still running after {limit:?}:\n{}", self.stderr());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn run_args<'a>(api: &'a FakeApi, out: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "run",
        "--kubeconfig",
        api.kubeconfig.to_str().expect("a UTF-8 path"),
        "--mode",
        "hostnetwork",
        "--nodes",
        "node-a,node-b",
        // rdmabw in the pods' PATH: nothing to copy in (the pods never start here).
        "--rdmabw",
        "rdmabw",
        "--pod-timeout",
        "30",
        "--quiet",
        "--output-file",
        out,
    ];
    args.extend_from_slice(extra);
    args
}

/// No kube-rs text: no Rust debug form of a `Status` or an error, no kube-rs error names.
fn assert_no_debug_text(stderr: &str) {
    for debug in [
        "Status {",
        "Error(",
        "ApiError",
        "Failed to parse error data",
        "ServiceError",
    ] {
        assert!(!stderr.contains(debug), "{debug:?} in:\n{stderr}");
    }
}

/// The diagnosis before the clean-up; the clean-up said as it starts; the pods left named with
/// the command that deletes them.
fn assert_diagnosis_then_leftovers(stderr: &str) {
    let diagnosis = stderr.find("ErrImageNeverPull").unwrap_or(usize::MAX);
    let deleting = stderr.find("railsweep: deleting 2 pod(s)").unwrap_or(0);
    assert!(
        diagnosis < deleting,
        "the diagnosis, then the clean-up:\n{stderr}"
    );
    assert!(
        stderr.contains("left behind; delete them with: kubectl delete pods -n railbench "),
        "{stderr}"
    );
}

#[test]
fn a_503_to_delete_is_said_in_kubectls_words_and_the_pods_left_named() {
    let api = FakeApi::start(Delete::Unavailable, Get::Answer);
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("out.csv");
    let out = out.to_str().expect("UTF-8");
    let r = Running::start(&run_args(&api, out, &[]));
    let (code, took, stderr) = r.wait(Duration::from_secs(60));
    assert_eq!(
        code,
        Some(2),
        "a pod that does not start is a set-up error:\n{stderr}"
    );
    assert!(took < Duration::from_secs(20), "took {took:?}:\n{stderr}");
    assert_diagnosis_then_leftovers(&stderr);
    assert!(
        stderr.contains(
            "Error from server (ServiceUnavailable): the server is currently unable to handle \
             the request (HTTP 503: upstream connect error"
        ),
        "{stderr}"
    );
    assert_no_debug_text(&stderr);
    // The diagnosis is said once.
    assert_eq!(stderr.matches("ErrImageNeverPull").count(), 1, "{stderr}");
    let deletes = api
        .requests()
        .iter()
        .filter(|r| r.starts_with("DELETE"))
        .count();
    assert_eq!(
        deletes,
        2,
        "one DELETE a pod, no retries: {:?}",
        api.requests()
    );
}

#[test]
fn a_delete_throttled_with_retry_after_is_sent_again_after_its_wait_as_kubectl_does() {
    let api = FakeApi::start(Delete::Throttled, Get::Answer);
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("out.csv");
    let out = out.to_str().expect("UTF-8");
    let r = Running::start(&run_args(&api, out, &[]));
    let (code, _, stderr) = r.wait(Duration::from_secs(60));
    assert_eq!(
        code,
        Some(2),
        "a pod that does not start is a set-up error:\n{stderr}"
    );
    assert_no_debug_text(&stderr);
    // Each pod's DELETE twice (429 with Retry-After: 1, then done), and nothing left behind.
    let deletes: Vec<String> = api
        .requests()
        .into_iter()
        .filter(|r| r.starts_with("DELETE"))
        .collect();
    assert_eq!(deletes.len(), 4, "{deletes:?}");
    assert!(!stderr.contains("left behind"), "{stderr}");
    assert!(!stderr.contains("TooManyRequests"), "{stderr}");
}

#[test]
fn a_delete_never_answered_is_given_up_at_the_request_timeout() {
    let api = FakeApi::start(Delete::Hang, Get::Answer);
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("out.csv");
    let out = out.to_str().expect("UTF-8");
    let r = Running::start(&run_args(&api, out, &["--request-timeout", "2s"]));
    let (code, took, stderr) = r.wait(Duration::from_secs(60));
    assert_eq!(code, Some(2), "{stderr}");
    // Two DELETEs of 2 s each, and the rest.
    assert!(took < Duration::from_secs(15), "took {took:?}:\n{stderr}");
    assert_diagnosis_then_leftovers(&stderr);
    assert!(
        stderr.contains(
            "the server was unable to return a response in the time allotted \
             (--request-timeout 2s"
        ),
        "{stderr}"
    );
    assert_no_debug_text(&stderr);
}

#[test]
fn ctrl_c_during_a_clean_up_exits_130_after_it_and_twice_at_once_naming_the_pods() {
    let api = FakeApi::start(Delete::Hang, Get::Answer);
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("out.csv");
    let out = out.to_str().expect("UTF-8");
    // No request timeout: only the clean-up's bound or Ctrl-C ends it.
    let r = Running::start(&run_args(&api, out, &["--request-timeout", "0"]));
    r.wait_for("railsweep: deleting 2 pod(s)", Duration::from_secs(30));
    r.interrupt();
    r.wait_for("finishing the clean-up", Duration::from_secs(5));
    std::thread::sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    r.interrupt();
    let (code, _, stderr) = r.wait(Duration::from_secs(10));
    assert!(
        t0.elapsed() < Duration::from_secs(3),
        "at once: {:?}",
        t0.elapsed()
    );
    assert_eq!(code, Some(130), "{stderr}");
    assert_diagnosis_then_leftovers(&stderr);
    assert_no_debug_text(&stderr);
}

/// The finding: one Ctrl-C during the clean-up was ignored for minutes, then exit 2.
#[test]
fn one_ctrl_c_during_a_clean_up_exits_130_once_the_bounded_clean_up_ends() {
    let api = FakeApi::start(Delete::Hang, Get::Answer);
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("out.csv");
    let out = out.to_str().expect("UTF-8");
    let r = Running::start(&run_args(&api, out, &["--request-timeout", "2s"]));
    r.wait_for("railsweep: deleting 2 pod(s)", Duration::from_secs(30));
    r.interrupt();
    let (code, took, stderr) = r.wait(Duration::from_secs(30));
    assert_eq!(code, Some(130), "never 2 after Ctrl-C:\n{stderr}");
    assert!(took < Duration::from_secs(15), "took {took:?}:\n{stderr}");
    assert!(stderr.contains("finishing the clean-up"), "{stderr}");
    assert_diagnosis_then_leftovers(&stderr);
    assert_no_debug_text(&stderr);
}

/// A GET never answered, and one whose body never comes after its headers, are given up at
/// `--request-timeout`, in words that name the flag.
#[test]
fn a_get_never_answered_is_given_up_at_the_request_timeout() {
    for get in [Get::Hang, Get::StallBody] {
        let api = FakeApi::start(Delete::Unavailable, get);
        let r = Running::start(&[
            "run",
            "--kubeconfig",
            api.kubeconfig.to_str().expect("UTF-8"),
            "--client-pod",
            "a",
            "--server-pod",
            "b",
            "--request-timeout",
            "1s",
            "--quiet",
        ]);
        let (code, took, stderr) = r.wait(Duration::from_secs(20));
        assert_eq!(code, Some(2), "{get:?}: {stderr}");
        assert!(
            took < Duration::from_secs(10),
            "{get:?}: {took:?}: {stderr}"
        );
        assert!(
            stderr.contains(
                "cannot get pod railbench/a: the server was unable to return a response in the \
                 time allotted (--request-timeout 1s: give a longer one, or 0 for no limit)"
            ),
            "{get:?}: {stderr}"
        );
        assert!(stderr.contains(&api.url), "names the API server: {stderr}");
        assert_no_debug_text(&stderr);
    }
}
