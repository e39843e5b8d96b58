//! Thin, safe wrappers over the raw Linux calls the rest of llrouter needs: stop signals, CPU
//! affinity and scheduling, the monotonic clock, eventfds, poll() and socket options. Each
//! wrapper keeps its `unsafe` block to the one call and states the invariant it relies on.

use std::collections::BTreeSet;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};

/// `CLOCK_MONOTONIC` in ns: the clock of the probe timestamps, of `bpf_ktime_get_ns()` and of
/// the ICMP and punt rate limits.
#[inline]
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The process runs as root (network namespaces, veth, XDP and BPF need it).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The first line of a test that needs root. Such tests are `#[ignore]`d, so a plain
/// `cargo test` by a user lists them as ignored rather than passing them; `scripts/test.sh` runs
/// them with `--include-ignored` as root and under CI, where this fails the test, loudly, if
/// the process is not root after all.
pub fn require_root() {
    assert!(
        is_root(),
        "this test needs root (network namespaces, veth, XDP, BPF); it is #[ignore]d unless \
         run with --include-ignored, as scripts/test.sh does as root and under CI"
    );
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop_signal(_sig: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Installs SIGINT/SIGTERM handlers that set the returned process-wide flag. Loops that run
/// until stopped poll it (the worker at least every 50 ms). Calling it again is harmless.
pub fn install_stop_signals() -> &'static AtomicBool {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only performs an atomic store, which is async-signal-safe, and
        // has the C ABI signal() expects.
        unsafe { libc::signal(sig, on_stop_signal as *const () as libc::sighandler_t) };
    }
    &STOP
}

/// The CPUs the calling thread may run on (`sched_getaffinity`).
pub fn affinity() -> io::Result<BTreeSet<usize>> {
    // SAFETY: cpu_set_t is plain data, valid when zeroed.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: the kernel writes at most size_of::<cpu_set_t>() bytes into the live `set`.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: CPU_ISSET reads inside `set` for indexes below CPU_SETSIZE.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// CPU time the calling thread has used, in ns (`CLOCK_THREAD_CPUTIME_ID`): what a
/// measurement on a shared or virtual machine should count, as it leaves out the time other
/// tasks and the hypervisor took.
pub fn thread_cpu_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: the kernel writes one timespec into the live `t`; the clock id is a constant
    // every Linux has (since 2.6.12), so the call cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Restricts the calling thread to `cpus` (`sched_setaffinity`).
pub fn set_affinity(cpus: &BTreeSet<usize>) -> io::Result<()> {
    set_affinity_of(0, cpus)
}

/// Restricts thread `tid` (0: the calling thread) to `cpus`. Needs the right to change that
/// thread (root, or the same user).
pub fn set_affinity_of(tid: u32, cpus: &BTreeSet<usize>) -> io::Result<()> {
    if let Some(&c) = cpus.iter().find(|&&c| c >= libc::CPU_SETSIZE as usize) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("CPU {c} is beyond the affinity mask"),
        ));
    }
    if cpus.is_empty() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty CPU set"));
    }
    // SAFETY: cpu_set_t is plain data, valid when zeroed.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        // SAFETY: c < CPU_SETSIZE (checked above), so CPU_SET writes inside `set`.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: the kernel reads exactly size_of::<cpu_set_t>() bytes from the live `set`; `tid`
    // is a plain integer (an unknown one fails with ESRCH).
    let rc = unsafe {
        libc::sched_setaffinity(
            tid as libc::pid_t,
            std::mem::size_of::<libc::cpu_set_t>(),
            &set,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Pins the calling thread to one CPU.
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    set_affinity(&BTreeSet::from([cpu]))
}

/// Kicks an AF_XDP socket's transmit: `sendto` with no data, as libxdp's `kick_tx`. The
/// answers that mean "busy, or not now" (EAGAIN, EBUSY, ENOBUFS, ENETDOWN: the next kick
/// retries) are not errors; any other (EINVAL: the driver cannot transmit on that queue) is.
pub fn kick_tx(fd: RawFd) -> io::Result<()> {
    // SAFETY: no buffer and no address are passed (null pointers, lengths 0); `fd` is an
    // AF_XDP socket the caller owns and keeps open for the call.
    let r = unsafe {
        libc::sendto(
            fd,
            std::ptr::null(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null(),
            0,
        )
    };
    if r >= 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EAGAIN | libc::EBUSY | libc::ENOBUFS | libc::ENETDOWN) => Ok(()),
        _ => Err(e),
    }
}

/// Gives the calling thread SCHED_FIFO priority `prio` (1..=99), so that a sink sharing a core
/// with a busy generator is scheduled the moment a packet wakes it.
pub fn set_fifo(prio: i32) -> io::Result<()> {
    let p = libc::sched_param {
        sched_priority: prio,
    };
    // SAFETY: `p` is a live sched_param the kernel only reads; pid 0 = the calling thread.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Runs the calling thread as SCHED_FIFO (priority 1) until dropped, then back to
/// SCHED_OTHER: for a short section holding a lock a pinned real-time reader waits for, so that
/// no ordinary thread preempts the holder in the middle (priority inversion). `None` if the
/// scheduler refused (not root): the section then runs as before.
pub struct FifoSection(());

impl FifoSection {
    pub fn enter() -> Option<FifoSection> {
        set_fifo(1).ok().map(|()| FifoSection(()))
    }
}

impl Drop for FifoSection {
    fn drop(&mut self) {
        let p = libc::sched_param { sched_priority: 0 };
        // SAFETY: `p` is a live sched_param the kernel only reads; pid 0 = the calling thread.
        unsafe {
            libc::sched_setscheduler(0, libc::SCHED_OTHER, &p);
        }
    }
}

/// Sets the calling thread's nice value (negative: more CPU under contention; needs root).
pub fn set_nice(nice: i32) -> io::Result<()> {
    // SAFETY: setpriority only reads its integer arguments; with PRIO_PROCESS, who = 0 is the
    // calling thread on Linux.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sends `sig` to the process `pid`. The caller must own `pid` and not have reaped it yet (a
/// reaped pid can be reused by an unrelated process).
pub fn signal_process(pid: u32, sig: libc::c_int) -> io::Result<()> {
    // SAFETY: kill(2) only reads its integer arguments; which process it reaches is the
    // caller's contract above.
    if unsafe { libc::kill(pid as libc::pid_t, sig) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Makes the child that `cmd` spawns receive SIGTERM when the thread that spawned it exits
/// (`PR_SET_PDEATHSIG`), so a daemon a test or the testbed starts (BIRD) never outlives a
/// killed parent. Spawn from a thread that lives as long as the child should.
pub fn term_with_parent(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the forked child before exec and only calls prctl(2), which
    // is async-signal-safe and takes plain integers.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Detaches the BPF link with kernel id `link_id` from its hook now (`BPF_LINK_DETACH`), however
/// many fds still refer to it. Closing our fd is not enough: a child another thread forked
/// holds a copy of every fd until its exec closes them, and the link stays attached until the
/// last copy goes. Errors: `ENOENT` (no such link), `EOPNOTSUPP` (a link type without detach).
pub fn bpf_link_detach(link_id: u32) -> io::Result<()> {
    const BPF_LINK_GET_FD_BY_ID: libc::c_long = 30;
    const BPF_LINK_DETACH: libc::c_long = 34;
    // bpf_attr's `link_id` (then next_id, open_flags) for GET_FD_BY_ID; `link_fd` for DETACH.
    let fd = bpf_call(BPF_LINK_GET_FD_BY_ID, &[link_id, 0, 0])?;
    // SAFETY: `fd` was just returned by the kernel and nothing else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
    bpf_call(BPF_LINK_DETACH, &[fd.as_raw_fd() as u32])?;
    Ok(())
}

/// bpf(2) with `attr` as the leading words of `union bpf_attr` (the kernel treats the rest as 0).
fn bpf_call(cmd: libc::c_long, attr: &[u32]) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, initialised bpf_attr prefix of the size passed, which the
    // commands used here only read.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr.as_ptr(),
            std::mem::size_of_val(attr),
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r)
}

/// Sets the calling thread's timer slack (ns): how late the kernel may fire its sleeps.
pub fn set_timer_slack(ns: u64) {
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer and only changes this thread's slack.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong) };
}

/// A non-blocking eventfd: one side `kick`s, the other polls its fd and `clear`s it.
#[derive(Debug)]
pub struct EventFd(OwnedFd);

impl EventFd {
    pub fn new() -> io::Result<EventFd> {
        // SAFETY: eventfd has no memory preconditions; the result is checked.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor owned by nobody else.
        Ok(EventFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// The descriptor to poll.
    pub fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }

    /// Makes the eventfd readable.
    pub fn kick(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to our own eventfd.
        unsafe { libc::write(self.fd(), (&one as *const u64).cast(), 8) };
    }

    /// Drains the eventfd (non-blocking: a no-op when it is not readable).
    pub fn clear(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads at most 8 bytes into a live u64 from our own non-blocking eventfd.
        unsafe { libc::read(self.fd(), (&mut v as *mut u64).cast(), 8) };
    }
}

/// `pollfd` for reading `fd`.
pub fn poll_in(fd: RawFd) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

/// poll() on `fds` for up to `timeout_ms`; the number of ready descriptors (0 on timeout or
/// when interrupted by a signal).
pub fn poll(fds: &mut [libc::pollfd], timeout_ms: i32) -> usize {
    // SAFETY: `fds` is a live, exclusively borrowed array of exactly `fds.len()` pollfds.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    n.max(0) as usize
}

/// Sets an integer socket option.
pub fn setsockopt_int(
    fd: RawFd,
    level: libc::c_int,
    opt: libc::c_int,
    v: libc::c_int,
) -> io::Result<()> {
    // SAFETY: passes a pointer to a live c_int with its exact size; the kernel only reads it.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Receives up to `bufs.len()` datagrams in one `recvmmsg` without blocking: their lengths,
/// in order (empty when nothing is queued or the call was interrupted).
pub fn recv_batch(fd: RawFd, bufs: &mut [[u8; 2048]]) -> io::Result<Vec<usize>> {
    let mut iov = iovecs(bufs);
    let mut msgs = mmsg_headers(&mut iov);
    // SAFETY: every header points at one iovec of `iov`, each at one buffer of `bufs`; both
    // outlive the call, and the kernel writes at most iov_len bytes into each.
    let n = unsafe {
        libc::recvmmsg(
            fd,
            msgs.as_mut_ptr(),
            msgs.len() as libc::c_uint,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
        )
    };
    if n < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EINTR) | Some(libc::ECONNREFUSED) => Ok(Vec::new()),
            _ => Err(e),
        };
    }
    Ok((msgs[..n as usize].iter())
        .map(|m| m.msg_len as usize)
        .collect())
}

/// Sends `bufs` as datagrams on the connected socket `fd` with `sendmmsg`, retrying once after
/// a pending ICMP error (`ECONNREFUSED` for an earlier datagram): how many went out. The rest
/// (`ENOBUFS` and the like) is not sent.
pub fn send_batch<B: AsMut<[u8]>>(fd: RawFd, bufs: &mut [B]) -> usize {
    let mut iov = iovecs(bufs);
    let mut msgs = mmsg_headers(&mut iov);
    let (mut done, mut retried) = (0usize, false);
    while done < msgs.len() {
        // SAFETY: msgs[done..] point at iovecs of `iov`, each at one buffer of `bufs`, which
        // outlive the call; the socket is connected, so no msg_name is needed.
        let n = unsafe {
            libc::sendmmsg(
                fd,
                msgs[done..].as_mut_ptr(),
                (msgs.len() - done) as libc::c_uint,
                0,
            )
        };
        if n <= 0 {
            if io::Error::last_os_error().raw_os_error() == Some(libc::ECONNREFUSED) && !retried {
                retried = true;
                continue;
            }
            break;
        }
        done += n as usize;
    }
    done
}

/// One iovec per buffer, each over the whole of it.
fn iovecs<B: AsMut<[u8]>>(bufs: &mut [B]) -> Vec<libc::iovec> {
    (bufs.iter_mut())
        .map(|b| {
            let b = b.as_mut();
            libc::iovec {
                iov_base: b.as_mut_ptr() as *mut libc::c_void,
                iov_len: b.len(),
            }
        })
        .collect()
}

/// One `mmsghdr` per iovec, each pointing at its own.
fn mmsg_headers(iov: &mut [libc::iovec]) -> Vec<libc::mmsghdr> {
    (iov.iter_mut())
        .map(|v| {
            // SAFETY: mmsghdr is plain data; all-zero is a valid (empty) header.
            let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
            m.msg_hdr.msg_iov = v;
            m.msg_hdr.msg_iovlen = 1;
            m
        })
        .collect()
}

/// Makes the kernel resolve `addr`'s link-layer address on interface `ifindex`: a datagram to
/// its discard port from a socket bound to that interface, so the kernel's route lookup for it
/// is the interface's (its VRF's table, when it is enslaved to one), not table main's.
pub fn poke_neighbor(ifindex: u32, addr: std::net::IpAddr) -> io::Result<()> {
    use std::net::{SocketAddr, UdpSocket};
    let bind: SocketAddr = match addr {
        std::net::IpAddr::V4(_) => (std::net::Ipv4Addr::UNSPECIFIED, 0).into(),
        std::net::IpAddr::V6(_) => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let s = UdpSocket::bind(bind)?;
    let ifindex =
        i32::try_from(ifindex).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: the fd is the live socket `s` owns; the option value is a c_int of the given size.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_BINDTOIFINDEX,
            (&ifindex as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    s.send_to(b"llrouter-resolve", SocketAddr::new(addr, 9))?;
    Ok(())
}

/// Moves the calling thread into the network namespace of `fd` (an open `/run/netns/NAME`).
pub fn enter_netns(fd: RawFd) -> io::Result<()> {
    // SAFETY: setns only reads the fd, valid for the duration of the call; it changes the
    // network namespace of the calling thread only.
    let rc = unsafe { libc::setns(fd, libc::CLONE_NEWNET) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sets a socket's receive buffer to `bytes`: `SO_RCVBUFFORCE` first (root: beyond
/// `net.core.rmem_max`, which caps plain `SO_RCVBUF` at ~200 KiB by default), else
/// `SO_RCVBUF`. Returns the size the kernel now reports (it doubles the request for its
/// bookkeeping), or `None` if neither option took.
pub fn set_rcvbuf(fd: RawFd, bytes: usize) -> Option<usize> {
    let v = bytes.min(libc::c_int::MAX as usize) as libc::c_int;
    let set = [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF]
        .into_iter()
        .any(|opt| setsockopt_int(fd, libc::SOL_SOCKET, opt, v).is_ok());
    if !set {
        return None;
    }
    let mut got: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `got` and `len` are live locals of the sizes passed; the kernel writes at most
    // `len` bytes into `got` and updates `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&mut got as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    (rc == 0).then_some(got.max(0) as usize)
}

/// Whether the AF_XDP socket `fd` (bound) runs in zero-copy mode (`XDP_OPTIONS`,
/// `XDP_OPTIONS_ZEROCOPY`); the kernel picks zero-copy at bind when the driver offers it.
pub fn xdp_zerocopy(fd: RawFd) -> io::Result<bool> {
    const SOL_XDP: libc::c_int = 283;
    const XDP_OPTIONS: libc::c_int = 8;
    const XDP_OPTIONS_ZEROCOPY: u32 = 1;
    let mut flags: u32 = 0;
    let mut len = std::mem::size_of::<u32>() as libc::socklen_t;
    // SAFETY: passes a pointer to a live u32 and its exact size in `len`; the kernel writes at
    // most `len` bytes (struct xdp_options is one u32) and updates `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            SOL_XDP,
            XDP_OPTIONS,
            (&mut flags as *mut u32).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(flags & XDP_OPTIONS_ZEROCOPY != 0)
}

/// An interface's channel counts (`ETHTOOL_GCHANNELS`): what `ethtool -l` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Channels {
    pub max_rx: u32,
    pub max_tx: u32,
    pub max_combined: u32,
    pub rx: u32,
    pub tx: u32,
    pub combined: u32,
}

impl Channels {
    /// Rx queues in use: queues that receive, with their own interrupt or shared with Tx.
    pub fn rx_queues(&self) -> u32 {
        self.rx + self.combined
    }
}

/// `ETHTOOL_GCHANNELS` on interface `name` of the calling thread's network namespace.
/// `Unsupported` (EOPNOTSUPP) for drivers without channels.
pub fn ethtool_channels(name: &str) -> io::Result<Channels> {
    const ETHTOOL_GCHANNELS: u32 = 0x3c;
    #[repr(C)]
    #[derive(Default)]
    struct EthtoolChannels {
        cmd: u32,
        max_rx: u32,
        max_tx: u32,
        max_other: u32,
        max_combined: u32,
        rx_count: u32,
        tx_count: u32,
        other_count: u32,
        combined_count: u32,
    }
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bad interface name {name:?}"),
        ));
    }
    let mut ch = EthtoolChannels {
        cmd: ETHTOOL_GCHANNELS,
        ..Default::default()
    };
    // SAFETY: a plain socket() call; the result is checked and owned below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, &b) in ifr.ifr_name.iter_mut().zip(bytes) {
        *d = b as libc::c_char;
    }
    ifr.ifr_ifru.ifru_data = (&mut ch as *mut EthtoolChannels).cast();
    // SAFETY: SIOCETHTOOL reads the NUL-terminated name in `ifr` and writes one struct
    // ethtool_channels (the layout above, the kernel's uapi) through `ifru_data`, which points
    // to `ch`, alive and exclusively borrowed for the duration of the call.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCETHTOOL, &mut ifr) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Channels {
        max_rx: ch.max_rx,
        max_tx: ch.max_tx,
        max_combined: ch.max_combined,
        rx: ch.rx_count,
        tx: ch.tx_count,
        combined: ch.combined_count,
    })
}

/// Creates a listening Unix-domain stream socket at `path` that only its owner can use:
/// socket → bind → chmod 0600 → listen. Until `listen`, connects are refused, so no client
/// ever reaches a socket with a wider mode than 0600. The socket file is removed again when
/// chmod or listen fails; `AddrInUse` means the path exists.
pub fn bind_unix_private(path: &std::path::Path) -> io::Result<std::os::unix::net::UnixListener> {
    use std::os::unix::ffi::OsStrExt;

    let bytes = path.as_os_str().as_bytes();
    // SAFETY: sockaddr_un is plain data, valid when zeroed.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    // sun_path holds 108 bytes including the terminating NUL
    if bytes.len() >= addr.sun_path.len() || bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "socket path must be shorter than {} bytes and contain no NUL",
                addr.sun_path.len()
            ),
        ));
    }
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    // SAFETY: socket() has no memory preconditions; the result is checked.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor owned by nobody else; OwnedFd closes it on every
    // error path below.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let len = std::mem::size_of::<libc::sa_family_t>() + bytes.len() + 1;
    // SAFETY: `addr` is a live sockaddr_un whose path is NUL-terminated within its first `len`
    // bytes (the length check above leaves room for the zeroed NUL); the kernel only reads it.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_un).cast::<libc::sockaddr>(),
            len as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let cpath = std::ffi::CString::new(bytes).expect("checked: no NUL");
    // SAFETY: `cpath` is a live NUL-terminated C string the kernel only reads.
    let rc = unsafe { libc::chmod(cpath.as_ptr(), 0o600) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        let _ = std::fs::remove_file(path);
        return Err(e);
    }
    // SAFETY: listen() has no memory preconditions; `fd` is our open socket.
    let rc = unsafe { libc::listen(fd.as_raw_fd(), 64) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        let _ = std::fs::remove_file(path);
        return Err(e);
    }
    Ok(std::os::unix::net::UnixListener::from(fd))
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`, the USER_HZ of `/proc` CPU times); `None`
/// when unknown.
pub fn clock_ticks_per_sec() -> Option<u64> {
    sysconf_positive(libc::_SC_CLK_TCK)
}

/// Makes glibc give every allocation of 128 KiB or more a mapping of its own, unmapped as soon as
/// it is freed. Left alone, glibc raises that threshold (up to 32 MiB) the first time such a
/// block is freed; from then on the route table's maps and a dump's transient maps come from
/// the heaps, and freed space at the top of a thread's heap stays resident (`malloc_trim` does
/// not trim a thread arena's top). With a full table that was ~28 MB of the router's resident
/// size (docs/datapath.md, "Routes and neighbours"). Call before the tables are built.
pub fn map_large_allocations() {
    // SAFETY: mallopt only sets the threshold for later allocations; it touches no memory the
    // program owns and is thread-safe in glibc.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 << 10);
    }
}

/// Asks the kernel to back the whole 2 MiB pages inside `len` bytes at `addr` with huge pages
/// (`madvise(MADV_HUGEPAGE)`), which transparent huge pages in `madvise` mode (Debian's
/// default) grant only where asked. Advice only: where the kernel has no huge page to give, or
/// THP is off, the memory stays in 4 KiB pages and nothing fails.
pub fn advise_huge_pages(addr: usize, len: usize) {
    const HUGE: usize = 2 << 20;
    let start = addr.next_multiple_of(HUGE);
    let end = (addr + len) & !(HUGE - 1);
    if end > start {
        // SAFETY: the range lies inside the caller's live allocation (rounded inwards to whole
        // huge pages); MADV_HUGEPAGE changes how pages are backed, never their contents, so
        // nothing the program reads or writes changes.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

/// Backs the route tables' randomly read arrays (IPv4 first level, IPv6 trie) with huge pages
/// from now on ([`llr_core::fwd::set_hot_array_advice`]). Call before the tables are built.
pub fn back_tables_with_huge_pages() {
    llr_core::fwd::set_hot_array_advice(advise_huge_pages);
}

/// Hands the allocator's free memory back to the kernel (`malloc_trim(0)`): after a full
/// table is dumped and diffed, the transient maps are freed but glibc keeps their pages, so
/// the resident size would stay at the peak.
pub fn release_free_memory() {
    // SAFETY: malloc_trim only returns free heap pages to the kernel; it touches no memory
    // the program still owns and is thread-safe in glibc.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The memory limit of the calling process's cgroup, bytes: the smallest `memory.max`
/// (cgroup v2) or `memory.limit_in_bytes` (v1) along its path; `None` without a limit.
pub fn cgroup_memory_max() -> Option<u64> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mut min: Option<u64> = None;
    let mut take = |root: &str, path: &str, file: &str| {
        let mut dir = std::path::PathBuf::from(root);
        for part in path.split('/').filter(|p| !p.is_empty()) {
            dir.push(part);
            let v = std::fs::read_to_string(dir.join(file)).ok();
            // "max" (v2) does not parse; v1 says "no limit" with a number near 2^63.
            if let Some(v) = v.and_then(|s| s.trim().parse::<u64>().ok()) {
                if v < 1 << 60 {
                    min = Some(min.map_or(v, |m| m.min(v)));
                }
            }
        }
    };
    for line in own.lines() {
        let mut f = line.splitn(3, ':');
        let (_, controllers, path) = (f.next(), f.next().unwrap_or(""), f.next().unwrap_or(""));
        if controllers.is_empty() {
            take("/sys/fs/cgroup", path, "memory.max");
            take("/sys/fs/cgroup/unified", path, "memory.max");
        } else if controllers.split(',').any(|c| c == "memory") {
            take("/sys/fs/cgroup/memory", path, "memory.limit_in_bytes");
        }
    }
    min
}

/// The memory page size in bytes (`sysconf(_SC_PAGESIZE)`); `None` when unknown.
pub fn page_size() -> Option<u64> {
    sysconf_positive(libc::_SC_PAGESIZE)
}

/// The number of CPUs configured on the machine (`sysconf(_SC_NPROCESSORS_CONF)`), online or
/// not; `None` when unknown.
pub fn cpus_configured() -> Option<u64> {
    sysconf_positive(libc::_SC_NPROCESSORS_CONF)
}

/// `sysconf(name)` when it answers a positive value.
fn sysconf_positive(name: libc::c_int) -> Option<u64> {
    // SAFETY: sysconf has no memory preconditions; an unknown name returns -1.
    let v = unsafe { libc::sysconf(name) };
    (v > 0).then_some(v as u64)
}

/// The soft limit on open file descriptors (`getrlimit(RLIMIT_NOFILE)`).
pub fn max_open_files() -> io::Result<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into `lim`, a live local.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(lim.rlim_cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_tx_kick_is_an_error_and_a_taken_one_is_not() {
        // A socket that takes the empty send: fine.
        let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        u.connect(u.local_addr().unwrap()).unwrap();
        kick_tx(u.as_raw_fd()).unwrap();
        // One with nowhere to send, and no socket at all: errors, with the kernel's reason.
        let v = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let e = kick_tx(v.as_raw_fd()).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EDESTADDRREQ), "{e}");
        let e = kick_tx(-1).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EBADF), "{e}");
    }

    fn anon_huge_kb() -> u64 {
        let s = std::fs::read_to_string("/proc/self/smaps_rollup").unwrap();
        s.lines()
            .find_map(|l| l.strip_prefix("AnonHugePages:"))
            .and_then(|v| v.trim().trim_end_matches(" kB").parse().ok())
            .expect("AnonHugePages in smaps_rollup")
    }

    #[test]
    fn route_tables_get_huge_pages_once_backed() {
        // The advice is what THP in `madvise` mode waits for; `always` grants them anyway and
        // `never` refuses them, so only the first two can show that the advice arrives.
        let mode = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .expect("THP mode");
        assert!(
            !mode.contains("[never]"),
            "transparent huge pages are off on this kernel ({}): nothing to test",
            mode.trim()
        );
        back_tables_with_huge_pages();
        let before = anon_huge_kb();
        let t = llr_core::fwd::Lpm4::new();
        // A /2 writes 4 Mi entries of the first level: 16 MiB, eight huge pages' worth.
        t.insert(0x4000_0000, 2, 7).unwrap();
        let after = anon_huge_kb();
        assert_eq!(t.lookup(0x4242_4242), Some(7));
        assert!(
            after >= before + 8 * 1024,
            "the table's 16 MiB took {} kB of huge pages (THP mode {})",
            after.saturating_sub(before),
            mode.trim()
        );
    }

    #[test]
    fn eventfd_kick_makes_it_readable_and_clear_drains_it() {
        let e = EventFd::new().unwrap();
        let mut fds = [poll_in(e.fd())];
        assert_eq!(poll(&mut fds, 0), 0);
        e.kick();
        assert_eq!(poll(&mut fds, 0), 1);
        e.clear();
        assert_eq!(poll(&mut fds, 0), 0);
    }

    #[test]
    fn affinity_round_trips() {
        let before = affinity().unwrap();
        let one = *before.iter().next().unwrap();
        pin_to_cpu(one).unwrap();
        assert_eq!(affinity().unwrap(), BTreeSet::from([one]));
        set_affinity(&before).unwrap();
        assert!(set_affinity(&BTreeSet::new()).is_err());
        assert!(mono_ns() > 0);
    }
}
