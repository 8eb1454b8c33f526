//! The client's side of one test.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use super::config::PeerChoice;
use super::error::{control, peer_failed, SessionError};
use super::outcome::{Outcome, Remote};
use super::perftest::{self, PerftestTest};
use super::resolve::resolve_request;
use super::side::{link, prepare};
use super::window::{window, WindowSpec, Windowed};
use super::Log;
use crate::control::{
    Accept, ControlChannel, Hello, Msg, Phase, PhaseTimeouts, RunSecret, WatchConfig,
    RDMABW_VERSION,
};
use crate::perftest::ReportUnit;
use crate::rails::RailRequest;
use crate::sysfs::SysRoots;
use wire::params::{LocalTuning, SizeResult, TestParams};
use wire::report::Role;

/// What the client runs.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// The server's control address (host or IP).
    pub server: String,
    /// The server's control port.
    pub port: u16,
    /// This side's rail (`-d`, `--netdev`, `-i`, `-x`).
    pub rail: RailRequest,
    /// The rail asked of the server (`--server-dev`, `--server-netdev`, `--server-gid-index`);
    /// its `port` is not sent.
    pub server_rail: RailRequest,
    /// The test.
    pub params: TestParams,
    /// This side's tuning (also sent to the server, which uses what it was not given itself).
    pub tuning: LocalTuning,
    /// Phase timeouts; the measure timeout is derived from `params`.
    pub timeouts: PhaseTimeouts,
    /// Heartbeats and silence limit during the window.
    pub watch: WatchConfig,
    /// This host's name, for the server's log.
    pub host: String,
    /// Where sysfs is.
    pub roots: SysRoots,
    /// The run's secret, presented in the hello (a server given one serves no one else).
    pub secret: Option<RunSecret>,
    /// Which tool the server may be (`--peer`).
    pub peer: PeerChoice,
    /// The units of this side's table: what it sends a perftest server as its figures.
    pub unit: ReportUnit,
}

/// Runs one test as the client. `stop` (SIGINT/SIGTERM) ends it early with
/// [`SessionError::Interrupted`].
pub fn run_client(
    cfg: &ClientConfig,
    stop: &Arc<AtomicBool>,
    log: &Log,
) -> Result<Outcome, SessionError> {
    run_client_streaming(cfg, stop, log, &mut |_| {})
}

/// [`run_client`], handing each measured window of a `--run_infinitely` test to `on_window`
/// as it closes: an [`Outcome`] whose `client_results` is that window alone (no counters).
/// Such a test only ends with an error, [`SessionError::Interrupted`] once `stop` is raised.
pub fn run_client_streaming(
    cfg: &ClientConfig,
    stop: &Arc<AtomicBool>,
    log: &Log,
    on_window: &mut dyn FnMut(&Outcome),
) -> Result<Outcome, SessionError> {
    let (rail, _) = resolve_request(&cfg.roots, &cfg.rail)?;
    log(&format!(
        "local rail: {} port {} GID index {} ({}){}",
        rail.device,
        rail.port,
        rail.gid_index,
        rail.gid,
        match (&rail.netdev, &rail.ip) {
            (Some(n), Some(ip)) => format!(" on {n} {ip}"),
            _ => String::new(),
        }
    ));
    let side = prepare(&cfg.roots, rail, &cfg.params, &cfg.tuning)?;

    let mut timeouts = cfg.timeouts.with_measure_for(&cfg.params);
    if cfg.params.bidirectional {
        timeouts.results = timeouts.results.max(timeouts.measure);
    }
    if cfg.peer == PeerChoice::Perftest {
        perftest::check_supported(&cfg.params, &cfg.tuning)?;
    }
    let addr = format!("{}:{}", cfg.server, cfg.port);
    let mut ch = ControlChannel::connect(addr.as_str(), timeouts).map_err(control)?;
    let peer = ch.peer_addr();
    log(&format!("connected to {peer}"));
    if cfg.peer != PeerChoice::Rdmabw {
        let version = ch
            .client_opening(cfg.peer == PeerChoice::Perftest)
            .map_err(control)?;
        if version.rdmabw.is_none() {
            perftest::check_supported(&cfg.params, &cfg.tuning)?;
            let t = PerftestTest {
                roots: &cfg.roots,
                params: &cfg.params,
                tuning: &cfg.tuning,
                unit: cfg.unit,
                host: cfg.server.clone(),
            };
            return perftest::client(
                &t,
                side,
                ch.into_stream(),
                &version,
                cfg.rail.gid_index.is_some(),
                stop,
                log,
            );
        }
        if cfg.peer == PeerChoice::Perftest {
            ch.fail("this client was started with --peer perftest");
            return Err(SessionError::ServerSetup(
                "the server is rdmabw, and this client was given --peer perftest: leave \
                 --peer out (or give --peer rdmabw)"
                    .into(),
            ));
        }
    }
    let hello = Hello::new(
        cfg.params.clone(),
        cfg.server_rail.device.clone(),
        &cfg.host,
    )
    .with_server_rail(cfg.server_rail.netdev.clone(), cfg.server_rail.gid_index)
    .with_tuning(cfg.tuning.clone())
    .with_secret(cfg.secret.clone());
    let accept: Accept = ch.client_handshake(&hello).map_err(control)?;
    if cfg.params.latency && !accept.latency {
        let why = format!(
            "the server's rdmabw ({}) does not run latency tests: run this rdmabw ({}) there",
            accept.rdmabw_version, RDMABW_VERSION
        );
        ch.fail(&why);
        return Err(SessionError::ServerSetup(why));
    }
    log(&format!(
        "server accepted: {} port {} GID index {}, rdmabw {}",
        accept.device, accept.port, accept.gid_index, accept.rdmabw_version
    ));
    let (ch, mut l) = link(ch, &cfg.roots, side, &cfg.tuning, "client")?;
    log(&format!(
        "QPs connected, path MTU {}; measuring{}",
        l.mtu.bytes(),
        if l.conn.polls_at_idle_priority(&cfg.tuning) {
            " (polling at idle CPU priority: on Soft-RoCE the kernel moves the data on these CPUs)"
                .to_string()
        } else if cfg.tuning.poll == wire::params::PollMode::Event {
            format!(
                " (waiting on completion events, one per {} writes per QP)",
                cfg.tuning.cq_mod.min(cfg.tuning.tx_depth).max(1)
            )
        } else {
            String::new()
        }
    ));
    let remote = Remote {
        host: cfg.server.clone(),
        addr: peer,
        device: accept.device,
        port: accept.port,
        gid_index: Some(u32::from(accept.gid_index)),
        gid: l.theirs.qps.first().map(|q| q.gid).unwrap_or_default(),
        netdev: cfg.server_rail.netdev.clone(),
        active_mtu_bytes: accept.active_mtu_bytes,
        line_rate_gbps: Some(accept.line_rate_gbps).filter(|r| *r > 0.0),
        rdmabw_version: Some(accept.rdmabw_version),
        perftest_version: None,
    };
    let mut outcome = Outcome {
        role: Role::Client,
        rail: l.rail.clone(),
        active_mtu_bytes: l.local_mtu,
        remote,
        params: cfg.params.clone(),
        tuning: cfg.tuning.clone(),
        path_mtu_bytes: l.mtu.bytes(),
        client_results: Vec::new(),
        server_results: Vec::new(),
        memory: l.memory,
        counters: Vec::new(),
    };
    let mut emit = |r: SizeResult| {
        let mut o = outcome.clone();
        o.client_results = vec![r];
        on_window(&o);
    };
    let spec = WindowSpec {
        roots: &cfg.roots,
        rail: &l.rail,
        watch: cfg.watch,
        params: &cfg.params,
        tuning: &cfg.tuning,
        writer: true,
        measure_timeout: timeouts.measure,
        role: Role::Client,
    };
    let Windowed {
        mut ch,
        results: client_results,
        counters,
    } = window(&spec, &mut l.conn, ch, stop, Some(&mut emit))?;
    ch.send(&Msg::Done {
        results: client_results.clone(),
        counters: counters.clone(),
    })
    .map_err(peer_failed)?;
    // --data_validation: a server that found a byte of ours wrong answers with an error
    // naming it (a failed peer here) instead of Done.
    let (server_results, server_counters) = ch.expect_done(Phase::Results).map_err(peer_failed)?;
    // -b: the server's writes are complete (its Done came after its last completion).
    // One way, nothing was written here: there is nothing to check.
    let mismatch = if cfg.params.bidirectional {
        l.conn.check_landing().map_err(SessionError::Local)?
    } else {
        None
    };
    ch.close();
    drop(l.conn);
    if let Some(m) = mismatch {
        return Err(SessionError::DataValidation(m));
    }
    if cfg.params.data_validation {
        log(&format!(
            "data validation: every byte {} wrote is what was sent",
            if cfg.params.bidirectional {
                "either side"
            } else {
                "this side"
            }
        ));
    }
    outcome.client_results = client_results;
    outcome.server_results = server_results;
    outcome.counters = counters.into_iter().chain(server_counters).collect();
    Ok(outcome)
}
