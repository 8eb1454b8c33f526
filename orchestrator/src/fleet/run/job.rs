//! One pair to sweep, and the sweep configuration it gets: built from the run's resolved
//! configuration by one function, [`PairConfig::for_job`], instead of patched per pair.

use std::path::PathBuf;

use crate::sweep::{Rdmabw, SweepConfig};

/// Which rails a job sweeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum JobRails {
    /// The run's: `--rails`, or every rail the pods have.
    Run,
    /// Only these (an outlier measured again, a suspect confirmed).
    Only(Vec<u32>),
}

impl JobRails {
    /// How many rails, where the job names them (`None`: the run's).
    pub(super) fn count(&self) -> Option<usize> {
        match self {
            JobRails::Run => None,
            JobRails::Only(r) => Some(r.len()),
        }
    }
}

/// One pair to sweep: client and server pod, and its rails.
#[derive(Debug, Clone)]
pub(super) struct Job {
    /// The round it runs in (from 0).
    pub(super) round: usize,
    pub(super) client: String,
    pub(super) server: String,
    pub(super) rails: JobRails,
}

/// The configuration every pair of the fleet starts from, resolved once from the run's: the
/// rdmabw to copy in (`--inject`) is copied once per pod before the rounds, so each pair's
/// sweep finds it already there.
#[derive(Debug)]
pub(super) struct PairConfig {
    /// The run's configuration with the pods' rdmabw as the pairs find it.
    base: SweepConfig,
    /// The local rdmabw each pod gets before the rounds (`--inject`).
    inject: Option<PathBuf>,
}

impl PairConfig {
    /// The pairs' configuration from the run's resolved one.
    pub(super) fn resolve(run: &SweepConfig) -> PairConfig {
        let mut base = run.clone();
        let inject = match &run.rdmabw {
            Rdmabw::Inject(local) => {
                base.rdmabw = Rdmabw::Injected;
                Some(local.clone())
            }
            Rdmabw::InPods(_) | Rdmabw::Injected => None,
        };
        PairConfig { base, inject }
    }

    /// The configuration pods are set up with (the rdmabw they will run).
    pub(super) fn base(&self) -> &SweepConfig {
        &self.base
    }

    /// The local rdmabw to copy into each pod, if any.
    pub(super) fn inject(&self) -> Option<&std::path::Path> {
        self.inject.as_deref()
    }

    /// The sweep configuration of a job over `rails`.
    pub(super) fn for_job(&self, rails: &JobRails) -> SweepConfig {
        let mut cfg = self.base.clone();
        if let JobRails::Only(r) = rails {
            cfg.rails = Some(r.clone());
        }
        cfg
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::tests::cfg;

    #[test]
    fn a_job_gets_the_run_config_with_its_own_rails() {
        let run = cfg(Some(vec![0, 1, 2]));
        let pairs = PairConfig::resolve(&run);
        assert_eq!(pairs.inject(), None);
        let all = pairs.for_job(&JobRails::Run);
        assert_eq!(all.rails, Some(vec![0, 1, 2]));
        assert_eq!(format!("{all:?}"), format!("{run:?}"));
        let only = pairs.for_job(&JobRails::Only(vec![2]));
        assert_eq!(only.rails, Some(vec![2]));
        // Everything else as the run's.
        let mut back = only.clone();
        back.rails = run.rails.clone();
        assert_eq!(format!("{back:?}"), format!("{run:?}"));
        // No --rails: a job of the run's rails sweeps every rail the pods have.
        let none = PairConfig::resolve(&cfg(None));
        assert_eq!(none.for_job(&JobRails::Run).rails, None);
        assert_eq!(none.for_job(&JobRails::Only(vec![1])).rails, Some(vec![1]));
        assert_eq!(JobRails::Run.count(), None);
        assert_eq!(JobRails::Only(vec![1, 3]).count(), Some(2));
    }

    #[test]
    fn inject_is_copied_once_and_every_job_finds_it_there() {
        let mut run = cfg(None);
        run.rdmabw = Rdmabw::Inject("/tmp/rdmabw".into());
        let pairs = PairConfig::resolve(&run);
        assert_eq!(pairs.inject(), Some(std::path::Path::new("/tmp/rdmabw")));
        assert_eq!(pairs.base().rdmabw, Rdmabw::Injected);
        for rails in [JobRails::Run, JobRails::Only(vec![0])] {
            assert_eq!(pairs.for_job(&rails).rdmabw, Rdmabw::Injected);
        }
        // The run's own configuration is left as it was.
        assert_eq!(run.rdmabw, Rdmabw::Inject("/tmp/rdmabw".into()));
    }
}
