//! Runs both sides of an RDMA WRITE test in two processes, endpoints exchanged as JSON lines
//! over a plain TCP socket (not the control module). Used to exercise the engine on the lab's
//! Soft-RoCE; see `scripts/lab`.
//!
//! ```text
//! write_pair server --listen 10.99.0.2:18600 [rail and test options]
//! write_pair client --connect 10.99.0.2:18600 [rail and test options]
//! write_pair list                          # devices per libibverbs and per sysfs (JSON)
//! write_pair rail   [rail options]          # prints the chosen rail (JSON)
//! write_pair dmabuf [rail options]          # tries register_dmabuf on the rail's device
//!
//! rail:  --dev NAME  --netdev IF  --ib-port N  -x INDEX
//! test:  -s BYTES | -a MAX   -n ITERS | -D SECONDS [--warmup S] [--cooldown S]
//!        -q QPS  -t TX_DEPTH  -Q CQ_MOD  -l POST_LIST  -I INLINE  --mtu BYTES
//!        --ack-timeout T  --retry N  -b (bidirectional)
//!        --no-watch (client: do not stop when the control socket dies; rely on the CQ)
//! ```
//!
//! Output: one JSON object on stdout per process; progress on stderr.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bench_core::engine::{Endpoints, Prepared};
use bench_core::error::Error;
use bench_core::rails::{self, RailRequest};
use bench_core::sysfs::{self, SysRoots};
use bench_core::verbs::{Device, PathMtu, PathParams};
use serde::{Deserialize, Serialize};
use wire::params::{Connection, LocalTuning, Sizes, TestLength, TestParams};

#[derive(Debug, Default)]
struct Args {
    mode: String,
    addr: String,
    rail: RailRequest,
    params: Option<TestParams>,
    tuning: LocalTuning,
    watch: bool,
}

fn parse() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let mut a = Args {
        mode: it
            .next()
            .ok_or("usage: write_pair server|client|rail|dmabuf [options]")?,
        watch: true,
        ..Default::default()
    };
    let mut sizes = Sizes::One {
        msg_size_bytes: 65536,
    };
    let mut length = TestLength::Iterations { iterations: 1000 };
    let (mut warmup, mut cooldown) = (0.5, 0.5);
    let mut qps = 1;
    let mut bidir = false;
    let mut t = LocalTuning::default();
    while let Some(flag) = it.next() {
        let mut val = || it.next().ok_or(format!("{flag} needs a value"));
        let num = |s: String| s.parse::<f64>().map_err(|e| format!("{s}: {e}"));
        match flag.as_str() {
            "--listen" | "--connect" => a.addr = val()?,
            "--dev" | "-d" => a.rail.device = Some(val()?),
            "--netdev" => a.rail.netdev = Some(val()?),
            "--ib-port" | "-i" => a.rail.port = Some(num(val()?)? as u8),
            "-x" | "--gid-index" => a.rail.gid_index = Some(num(val()?)? as u32),
            "-s" => {
                sizes = Sizes::One {
                    msg_size_bytes: num(val()?)? as u64,
                }
            }
            "-a" => {
                sizes = Sizes::Sweep {
                    max_bytes: num(val()?)? as u64,
                }
            }
            "-n" => {
                length = TestLength::Iterations {
                    iterations: num(val()?)? as u64,
                }
            }
            "-D" => {
                length = TestLength::Duration {
                    duration_s: num(val()?)?,
                    warmup_s: 0.0,
                    cooldown_s: 0.0,
                }
            }
            "--warmup" => warmup = num(val()?)?,
            "--cooldown" => cooldown = num(val()?)?,
            "-q" => qps = num(val()?)? as u32,
            "-t" => t.tx_depth = num(val()?)? as u32,
            "-Q" => t.cq_mod = num(val()?)? as u32,
            "-l" => t.post_list = num(val()?)? as u32,
            "-I" => t.inline_bytes = num(val()?)? as u32,
            "--mtu" => t.mtu_bytes = Some(num(val()?)? as u32),
            "--ack-timeout" => t.ack_timeout = num(val()?)? as u8,
            "--retry" => t.retry_count = num(val()?)? as u8,
            "-b" => bidir = true,
            "--no-watch" => a.watch = false,
            other => return Err(format!("unknown option {other}")),
        }
    }
    if let TestLength::Duration { duration_s, .. } = length {
        length = TestLength::Duration {
            duration_s,
            warmup_s: warmup,
            cooldown_s: cooldown,
        };
    }
    a.params = Some(TestParams {
        sizes,
        length,
        qps,
        connection: Connection::RC,
        bidirectional: bidir,
        run_infinitely: false,
        data_validation: false,
        latency: false,
    });
    a.tuning = t;
    Ok(a)
}

#[derive(Debug, Serialize, Deserialize)]
struct Hello {
    info: Endpoints,
    params: TestParams,
}

fn epoch() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

fn log(role: &str, t0: Instant, msg: impl std::fmt::Display) {
    eprintln!("[{role} {:7.3}s] {msg}", t0.elapsed().as_secs_f64());
}

fn send<T: Serialize>(s: &mut TcpStream, v: &T) -> Result<(), String> {
    let mut line = serde_json::to_string(v).map_err(|e| e.to_string())?;
    line.push('\n');
    s.write_all(line.as_bytes())
        .map_err(|e| format!("control socket: {e}"))
}

fn recv<T: for<'de> Deserialize<'de>>(r: &mut BufReader<TcpStream>) -> Result<T, String> {
    let mut line = String::new();
    match r.read_line(&mut line) {
        Ok(0) => Err("control socket closed by the peer".into()),
        Ok(_) => serde_json::from_str(&line).map_err(|e| format!("bad message {line:?}: {e}")),
        Err(e) => Err(format!("control socket: {e}")),
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("write_pair: error: {e}");
            println!("{}", serde_json::json!({ "error": e }));
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let a = parse()?;
    let t0 = Instant::now();
    if a.mode == "list" {
        // libibverbs' view, next to sysfs' (they differ when a provider is missing).
        let verbs = Device::list().map_err(|e| e.to_string())?;
        let inv = sysfs::discover(&SysRoots::default()).map_err(|e| e.to_string())?;
        println!("{}", serde_json::json!({ "verbs": verbs, "sysfs": inv }));
        return Ok(());
    }
    let roots = SysRoots::default();
    let inv = sysfs::discover(&roots).map_err(|e| e.to_string())?;
    let rail = rails::resolve_rail(&inv, &roots, &a.rail).map_err(|e| e.to_string())?;
    let role = a.mode.clone();
    log(
        &role,
        t0,
        format!(
            "rail: {} port {} gid {} ({}) on {} ip {} rate {}",
            rail.device,
            rail.port,
            rail.gid_index,
            rail.gid,
            rail.netdev.as_deref().unwrap_or("-"),
            rail.ip.map(|i| i.to_string()).unwrap_or_default(),
            rail.rate.as_deref().unwrap_or("?")
        ),
    );
    match a.mode.as_str() {
        "rail" => {
            println!(
                "{}",
                serde_json::to_string(&rail).map_err(|e| e.to_string())?
            );
            return Ok(());
        }
        "dmabuf" => {
            let dev = Device::open(&rail.device).map_err(|e| e.to_string())?;
            let pd = dev.alloc_pd().map_err(|e| e.to_string())?;
            // Any open fd: a provider without dma-buf support refuses before looking at it.
            let f = std::fs::File::open("/dev/zero").map_err(|e| e.to_string())?;
            use std::os::fd::AsFd;
            let r = pd.register_dmabuf(f.as_fd(), 0, 1 << 20, 0);
            let msg = match &r {
                Ok(_) => "registered (unexpected on rxe)".to_string(),
                Err(e) => e.to_string(),
            };
            let typed = matches!(r, Err(Error::DmabufUnsupported { .. }));
            println!(
                "{}",
                serde_json::json!({ "device": rail.device, "dmabuf_unsupported": typed, "message": msg })
            );
            return Ok(());
        }
        "server" | "client" => {}
        m => return Err(format!("unknown mode {m}")),
    }
    let params = a.params.clone().ok_or("no params")?;
    let dev = Device::open(&rail.device).map_err(|e| e.to_string())?;
    let prep = Prepared::for_rail(&dev, &rail, &params, &a.tuning).map_err(|e| e.to_string())?;
    let local = prep.info().map_err(|e| e.to_string())?;
    log(
        &role,
        t0,
        format!(
            "prepared {} QPs {:?}, mr {:?}",
            local.qps.len(),
            local.qps.iter().map(|q| q.qpn).collect::<Vec<_>>(),
            local.mr
        ),
    );

    let stream = if a.mode == "server" {
        let l = TcpListener::bind(&a.addr).map_err(|e| format!("listen {}: {e}", a.addr))?;
        log(&role, t0, format!("listening on {}", a.addr));
        // Give up when no client comes (it may have failed before connecting).
        l.set_nonblocking(true).map_err(|e| e.to_string())?;
        let deadline = Instant::now() + Duration::from_secs(60);
        let s = loop {
            match l.accept() {
                Ok((s, _)) => break s,
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(50))
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    return Err("no client connected within 60 s".into())
                }
                Err(e) => return Err(e.to_string()),
            }
        };
        s.set_nonblocking(false).map_err(|e| e.to_string())?;
        s
    } else {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match TcpStream::connect(&a.addr) {
                Ok(s) => break s,
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(e) => return Err(format!("connect {}: {e}", a.addr)),
            }
        }
    };
    let mut w = stream.try_clone().map_err(|e| e.to_string())?;
    let mut r = BufReader::new(stream);
    send(
        &mut w,
        &Hello {
            info: local.clone(),
            params: params.clone(),
        },
    )?;
    let peer: Hello = recv(&mut r)?;
    if let Err(m) = params.check_matches(&peer.params) {
        return Err(m.to_string());
    }
    let remote_mtu = PathMtu::from_bytes(peer.info.mtu_bytes).ok_or("peer sent a bad MTU")?;
    let mtu = PathMtu::negotiate(prep.active_mtu(), remote_mtu, a.tuning.mtu_bytes)
        .map_err(|e| e.to_string())?;
    let path =
        PathParams::new(rail.port, rail.gid_index, &a.tuning, mtu).map_err(|e| e.to_string())?;
    let mut conn = prep.connect(&peer.info, &path).map_err(|e| e.to_string())?;
    log(
        &role,
        t0,
        format!(
            "connected to {} QPs {:?}, MTU {}",
            peer.info.device,
            peer.info.qps.iter().map(|q| q.qpn).collect::<Vec<_>>(),
            mtu.bytes()
        ),
    );
    // Both sides are in RTS (hence RTR) once each has said so.
    send(&mut w, &"ready")?;
    let _: String = recv(&mut r)?;

    let initiator = a.mode == "client" || params.bidirectional;
    let stop = Arc::new(AtomicBool::new(false));
    // Watch the control socket: EOF means the peer is gone.
    let peer_done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (stop, peer_done, watch) = (Arc::clone(&stop), Arc::clone(&peer_done), a.watch);
        let role = role.clone();
        std::thread::spawn(move || {
            let mut line = String::new();
            loop {
                line.clear();
                match r.read_line(&mut line) {
                    Ok(0) | Err(_) => {
                        if watch && !peer_done.load(Ordering::SeqCst) {
                            log(
                                &role,
                                t0,
                                format!("control socket closed at epoch {:.3}: stopping", epoch()),
                            );
                            stop.store(true, Ordering::SeqCst);
                        }
                        return None;
                    }
                    Ok(_) if line.contains("\"done\"") => {
                        peer_done.store(true, Ordering::SeqCst);
                        return Some(line.clone());
                    }
                    Ok(_) => {}
                }
            }
        })
    };

    let mut out = serde_json::json!({
        "role": role,
        "rail": rail,
        "qpns": conn.qp_numbers(),
        "mtu": mtu.bytes(),
    });
    if initiator {
        let t_run = Instant::now();
        // Size by size (what run_writes does), to log progress as it happens.
        let mut done = Vec::new();
        let mut res = Ok(());
        for size in params.sizes.list() {
            match conn.run_size(
                size,
                &params.length,
                &a.tuning,
                bench_core::engine::StopFlags::one(&stop),
            ) {
                Ok(r) => {
                    log(
                        &role,
                        t0,
                        format!("size {size} done: {:.3} Gb/s", r.bw_avg_gbps),
                    );
                    done.push(r);
                }
                Err(e) => {
                    log(&role, t0, format!("size {size} failed"));
                    res = Err(e);
                    break;
                }
            }
        }
        let res = res.map(|()| done);
        let wall = t_run.elapsed().as_secs_f64();
        match res {
            Ok(results) => {
                for r in &results {
                    log(&role, t0, format!(
                        "{:>8} B  {:>8} writes  avg {:7.3} Gb/s ({:5.1}% of line)  p1 {:7.3}  p50 {:7.3}  p99 {:7.3}  peak {:7.3}  {:6.3} Mpps  cpu {:.3}/{:.3} s",
                        r.msg_size_bytes, r.iterations, r.bw_avg_gbps,
                        wire::threshold::percent_of_line_rate(r.bw_avg_gbps, rail.line_rate_gbps).unwrap_or(0.0),
                        r.bw_p1_gbps, r.bw_p50_gbps, r.bw_p99_gbps, r.bw_peak_gbps, r.msg_rate_mpps, r.cpu_s, r.measured_s
                    ));
                }
                out["results"] = serde_json::to_value(&results).map_err(|e| e.to_string())?;
            }
            Err(e) => {
                log(
                    &role,
                    t0,
                    format!("run failed after {wall:.3} s (epoch {:.3}): {e}", epoch()),
                );
                out["failed_at_epoch"] = serde_json::json!(epoch());
                out["run_error"] = serde_json::Value::String(e.to_string());
                out["run_error_kind"] = serde_json::Value::String(
                    format!("{e:?}")
                        .split([' ', '{', '('])
                        .next()
                        .unwrap_or("")
                        .to_string(),
                );
                out["failed_after_s"] = serde_json::json!(wall);
            }
        }
    }
    // An initiator says "done" and waits for the peer's; the responder of a one-way test
    // waits for the initiator's "done" first (keeping its QPs and memory alive), so that its
    // own "done" cannot be mistaken for the end while the initiator still runs.
    let t_wait = Instant::now();
    if initiator {
        let _ = send(&mut w, &"done");
    }
    let peer_line = watcher.join().ok().flatten();
    if !initiator {
        let _ = send(&mut w, &"done");
    }
    out["peer_done"] = serde_json::json!(peer_line.is_some());
    out["waited_for_peer_s"] = serde_json::json!(t_wait.elapsed().as_secs_f64());
    println!("{out}");
    drop(conn);
    if out.get("run_error").is_some() {
        return Err(out["run_error"]
            .as_str()
            .unwrap_or("run failed")
            .to_string());
    }
    Ok(())
}
