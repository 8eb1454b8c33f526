//! The calling thread's scheduling and CPU placement, and the process's CPU time (libc).

use std::time::Duration;

/// Moves the calling thread to the `SCHED_IDLE` scheduling class: from then on it runs only
/// while no ordinary thread wants its CPU, and any that wakes takes the CPU at once. For an
/// unprivileged thread this is one-way (going back needs `CAP_SYS_NICE`).
pub fn set_thread_sched_idle() -> std::io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid sched_param that outlives the call; pid 0 names the calling
    // thread, and the call changes nothing but its scheduling class.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The CPUs the calling thread may run on (`sched_getaffinity`).
pub fn allowed_cpus() -> std::io::Result<Vec<u32>> {
    // SAFETY: cpu_set_t is plain old data for which all-zero bytes are a valid (empty) set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable cpu_set_t of the size passed; pid 0 is this thread.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let max = u32::try_from(libc::CPU_SETSIZE).unwrap_or(1024);
    Ok((0..max)
        .filter(|c| {
            // SAFETY: CPU_ISSET reads the set within its bounds (cpu < CPU_SETSIZE).
            unsafe { libc::CPU_ISSET(*c as usize, &set) }
        })
        .collect())
}

/// Lets the calling thread run on `cpu` only (`sched_setaffinity`).
pub fn pin_current_thread(cpu: u32) -> std::io::Result<()> {
    let cpu = cpu as usize;
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(std::io::Error::from(std::io::ErrorKind::InvalidInput));
    }
    // SAFETY: cpu_set_t is plain old data for which all-zero bytes are a valid (empty) set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` is below CPU_SETSIZE, so CPU_SET writes inside the set.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is the calling thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The CPU the calling thread is running on now (`sched_getcpu`).
pub fn current_cpu() -> Option<u32> {
    // SAFETY: sched_getcpu takes no arguments and only returns a number.
    let cpu = unsafe { libc::sched_getcpu() };
    u32::try_from(cpu).ok()
}

/// User plus system CPU time this process has used so far (`getrusage(RUSAGE_SELF)`).
pub fn process_cpu_time() -> Duration {
    // SAFETY: `rusage` is plain old data for which all-zero bytes are a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage; getrusage writes only into it.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    if rc != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(u64::try_from(t.tv_sec).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t.tv_usec).unwrap_or(0))
    };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}
